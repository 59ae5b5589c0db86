//! The run history on every backend: runs, stages, documents, transcripts (order, offsets,
//! exact bytes, limits, compression), reading while writing, and deleting old runs.

use std::time::Duration;

use cordon_store::{
    Chunk, ChunkBody, ChunkFilter, ExportedBody, NewRun, RunFilter, RunId, RunKind, RunState,
    StageRecord, Store, StoreLocation, Stream,
};
use cordon_test_support::wait_until;
use pretty_assertions::assert_eq;
use serde_json::json;

each_history_backend!(runs_stages_and_documents_round_trip, |t: &TestStore| {
    let store = t.open();
    let first = store
        .begin_run(&new_run(&["cargo", "test"]))
        .expect("begin");
    let second = store
        .begin_run(&NewRun {
            kind: RunKind::Verify,
            repo: None,
            session: None,
            command: json!(["cordon", "verify"]),
        })
        .expect("begin");
    assert_ne!(first, second);

    let stage = StageRecord {
        index: 0,
        name: "lint".to_owned(),
        status: cordon_types::StageStatus::Fail,
        document: json!({"name": "lint", "exit_code": 1}),
    };
    assert!(store.record_stage(&second, &stage).expect("stage"));
    let unknown: RunId = "r-aaaaaaaaaa".parse().expect("id");
    assert!(
        !store
            .record_stage(&unknown, &stage)
            .expect("stage of unknown run")
    );

    let document =
        json!({"schema": "cordon.run-result/v1", "status": "pass", "nested": [1, 2.5, null]});
    assert!(
        store
            .finish_run(&first, RunState::Pass, Some(&document))
            .expect("finish")
    );
    assert!(
        !store
            .finish_run(&unknown, RunState::Pass, None)
            .expect("finish unknown")
    );

    let record = store.get_run(&first).expect("get").expect("exists");
    assert_eq!(record.run.id, first);
    assert_eq!(record.run.kind, RunKind::Run);
    assert_eq!(record.run.status, RunState::Pass);
    assert_eq!(record.run.repo.as_deref(), Some("/src/project"));
    assert_eq!(record.run.command, json!(["cargo", "test"]));
    assert_eq!(record.run.owner_pid, i64::from(std::process::id()));
    assert_eq!(record.document, Some(document));
    assert_eq!(
        record.document_schema.as_deref(),
        Some("cordon.run-result/v1")
    );
    let finished = record.run.finished_at_ms.expect("finished");
    assert!(finished >= record.run.started_at_ms);
    assert_eq!(
        record.run.duration_ms,
        Some(finished - record.run.started_at_ms)
    );

    let verify = store.get_run(&second).expect("get").expect("exists");
    assert_eq!(verify.stages, vec![stage]);
    assert_eq!(verify.run.status, RunState::Running);
    assert_eq!(verify.document, None);
    assert_eq!(store.get_run(&unknown).expect("get unknown"), None);

    // Newest first, filters by status and repo, limit.
    let all = store.list_runs(&RunFilter::default()).expect("list");
    let ids: Vec<&RunId> = all.iter().map(|r| &r.id).collect();
    assert_eq!(ids, vec![&second, &first]);
    let passed = store
        .list_runs(&RunFilter {
            status: Some(RunState::Pass),
            ..RunFilter::default()
        })
        .expect("list");
    assert_eq!(passed.len(), 1);
    assert_eq!(passed[0].id, first);
    let in_repo = store
        .list_runs(&RunFilter {
            repo: Some("/src/project".to_owned()),
            ..RunFilter::default()
        })
        .expect("list");
    assert_eq!(
        in_repo.iter().map(|r| &r.id).collect::<Vec<_>>(),
        vec![&first]
    );
    let one = store
        .list_runs(&RunFilter {
            limit: 1,
            ..RunFilter::default()
        })
        .expect("list");
    assert_eq!(one.len(), 1);
    assert_eq!(one[0].id, second);

    // Transcripts are private: the database and its WAL are readable by their owner only.
    use std::os::unix::fs::PermissionsExt;
    let files = match t.location() {
        StoreLocation::Sqlite(db) => vec![db.clone(), db.with_extension("db-wal")],
        _ => vec![],
    };
    for file in files {
        let mode = std::fs::metadata(&file)
            .expect("exists")
            .permissions()
            .mode();
        assert_eq!(mode & 0o077, 0, "{} has mode {mode:o}", file.display());
    }

    // Reopening sees the same data.
    drop(store);
    let again = t.open();
    assert_eq!(again.list_runs(&RunFilter::default()).expect("list"), all);

    // By kind: the review watcher's runs apart from the user's own.
    let watched = again
        .begin_run(&NewRun {
            kind: RunKind::Watch,
            repo: Some("/src/project".to_owned()),
            session: Some("abcd2345".to_owned()),
            command: json!(["/bin/sh", "-c", "./poll.sh"]),
        })
        .expect("begin");
    let of_kind = |kind| {
        again
            .list_runs(&RunFilter {
                kind: Some(kind),
                ..RunFilter::default()
            })
            .expect("list")
            .into_iter()
            .map(|r| (r.id, r.kind))
            .collect::<Vec<_>>()
    };
    assert_eq!(
        of_kind(RunKind::Watch),
        vec![(watched.clone(), RunKind::Watch)]
    );
    assert_eq!(of_kind(RunKind::Run), vec![(first.clone(), RunKind::Run)]);
    assert_eq!(
        of_kind(RunKind::Verify),
        vec![(second.clone(), RunKind::Verify)]
    );
    assert_eq!(
        again
            .get_run(&watched)
            .expect("get")
            .expect("exists")
            .run
            .kind,
        RunKind::Watch
    );
});

each_history_backend!(
    transcript_keeps_order_offsets_and_exact_bytes,
    |t: &TestStore| {
        let store = t.open();
        let id = store.begin_run(&new_run(&["prog"])).expect("begin");
        let writer = store.transcript(&id).expect("transcript");
        let binary: Vec<u8> = (0..=255u8).cycle().take(5000).collect();
        let repetitive = vec![b'a'; 100_000];
        writer.write(None, Stream::Stdout, b"out 1\n");
        writer.write(None, Stream::Stderr, b"err 1\n");
        writer.write(None, Stream::Stdout, &binary);
        writer.write(None, Stream::Stdout, b"");
        writer.write(
            None,
            Stream::Stderr,
            "caf\u{e9} [REDACTED:token]\r\n".as_bytes(),
        );
        writer.write(None, Stream::Stdout, &repetitive);
        let stats = writer.finish().expect("finish");
        let total =
            6 + 6 + binary.len() + "caf\u{e9} [REDACTED:token]\r\n".len() + repetitive.len();
        assert_eq!(stats.bytes_written, total as u64);
        assert_eq!(stats.bytes_lost, 0);

        let chunks = store.logs(&id, &ChunkFilter::default()).expect("logs");
        let seqs: Vec<u64> = chunks.iter().map(|c| c.seq).collect();
        let mut sorted = seqs.clone();
        sorted.sort_unstable();
        assert_eq!(seqs, sorted, "chunks come in seq order");
        let streams: Vec<Stream> = chunks.iter().map(|c| c.stream).collect();
        assert_eq!(
            streams.first().copied(),
            Some(Stream::Stdout),
            "first write first"
        );
        // Interleaving: stdout, stderr, stdout..., stderr, stdout...
        let mut switches = streams.windows(2).filter(|w| w[0] != w[1]).count();
        switches += 1;
        assert_eq!(switches, 5, "streams: {streams:?}");

        let stdout = store
            .logs(
                &id,
                &ChunkFilter {
                    stream: Some(Stream::Stdout),
                    ..ChunkFilter::default()
                },
            )
            .expect("stdout");
        let mut expected = b"out 1\n".to_vec();
        expected.extend_from_slice(&binary);
        expected.extend_from_slice(&repetitive);
        assert_eq!(data(&stdout), expected, "stdout bytes exactly as written");
        // Offsets are contiguous within the stream.
        let mut next = 0;
        for chunk in &stdout {
            assert_eq!(chunk.offset, next);
            if let ChunkBody::Data(bytes) = &chunk.body {
                next += bytes.len() as u64;
            }
        }
        let stderr = store
            .logs(
                &id,
                &ChunkFilter {
                    stream: Some(Stream::Stderr),
                    ..ChunkFilter::default()
                },
            )
            .expect("stderr");
        let mut expected_err = b"err 1\n".to_vec();
        expected_err.extend_from_slice("caf\u{e9} [REDACTED:token]\r\n".as_bytes());
        assert_eq!(data(&stderr), expected_err);
        assert_eq!(stderr[1].offset, 6);

        // The repetitive part is stored compressed: the file stays far below 100 KB of payload
        // (measured beyond what an empty store takes: one page per table and index).
        drop(store);
        if let StoreLocation::Sqlite(db) = t.location() {
            let size_of = |db: &std::path::Path| {
                std::fs::metadata(db).expect("db").len()
                    + std::fs::metadata(db.with_extension("db-wal")).map_or(0, |m| m.len())
            };
            let empty = db.with_file_name("empty.db");
            drop(Store::open_sqlite(&empty).expect("an empty store"));
            let size = size_of(db).saturating_sub(size_of(&empty));
            assert!(size < 62_000, "the payload takes {size} bytes");
        }

        // The export is lossless: text where UTF-8, base64 where not.
        let store = t.open();
        let export = store.export(&id).expect("export").expect("exists");
        let json = serde_json::to_value(&export).expect("serializes");
        assert_eq!(json["schema"], "cordon.run-export/v1");
        assert_eq!(export.transcript.len(), chunks.len());
        let kinds: Vec<&str> = export
            .transcript
            .iter()
            .map(|c| match &c.body {
                ExportedBody::Text { .. } => "text",
                ExportedBody::Base64 { .. } => "base64",
                ExportedBody::Lost { .. } => "lost",
            })
            .collect();
        assert!(
            kinds.contains(&"base64") && kinds.contains(&"text"),
            "{kinds:?}"
        );
    }
);

each_history_backend!(
    transcript_continues_after_a_second_writer_opens,
    |t: &TestStore| {
        let store = t.open();
        let id = store.begin_run(&new_run(&["prog"])).expect("begin");
        let writer = store.transcript(&id).expect("transcript");
        writer.write(Some("build"), Stream::Stdout, b"0123456789");
        writer.finish().expect("finish");
        let writer = store.transcript(&id).expect("transcript again");
        writer.write(Some("build"), Stream::Stdout, b"abc");
        writer.write(Some("test"), Stream::Stdout, b"xyz");
        writer.finish().expect("finish");
        let chunks = store.logs(&id, &ChunkFilter::default()).expect("logs");
        let placed: Vec<(u64, Option<&str>, u64)> = chunks
            .iter()
            .map(|c| (c.seq, c.stage.as_deref(), c.offset))
            .collect();
        assert_eq!(
            placed,
            vec![
                (0, Some("build"), 0),
                (1, Some("build"), 10),
                (2, Some("test"), 0)
            ]
        );
        let build = store
            .logs(
                &id,
                &ChunkFilter {
                    stage: Some("build".to_owned()),
                    stream: None,
                },
            )
            .expect("logs");
        assert_eq!(data(&build), b"0123456789abc");
    }
);

each_history_backend!(
    chunks_are_visible_to_another_connection_before_finish,
    |t: &TestStore| {
        let store = t.open();
        let id = store.begin_run(&new_run(&["prog"])).expect("begin");
        let writer = store.transcript(&id).expect("transcript");
        writer.write(None, Stream::Stdout, b"early output\n");
        // The background flush makes it visible (within about FLUSH_INTERVAL), before `finish`.
        let reader = t.open();
        let mut seen = Vec::new();
        wait_until(
            "the chunk is visible to another connection",
            Duration::from_secs(30),
            || {
                seen = reader.logs(&id, &ChunkFilter::default()).expect("logs");
                !seen.is_empty()
            },
        );
        assert_eq!(data(&seen), b"early output\n");
        writer.finish().expect("finish");
    }
);

each_history_backend!(
    delete_older_than_removes_old_finished_runs_and_their_chunks,
    |t: &TestStore| {
        let store = t.open();
        let old = store.begin_run(&new_run(&["old"])).expect("begin");
        let writer = store.transcript(&old).expect("transcript");
        writer.write(None, Stream::Stdout, b"old output");
        writer.finish().expect("finish");
        store
            .finish_run(&old, RunState::Pass, None)
            .expect("finish");
        let old_running = store
            .begin_run(&new_run(&["still running"]))
            .expect("begin");
        let recent = store.begin_run(&new_run(&["recent"])).expect("begin");
        store
            .finish_run(&recent, RunState::Fail, None)
            .expect("finish");
        // Two of them started two hours ago. (A read first: it moves what a recording handle
        // left in the run log into the database, where the raw SQL below looks.)
        store.list_runs(&RunFilter::default()).expect("list");
        t.raw_sql(
        &format!(
            "UPDATE runs SET started_at_ms = started_at_ms - 7200000 WHERE id IN ('{old}', '{old_running}')"
        ),
    );

        assert_eq!(
            store
                .delete_older_than(Duration::from_secs(3 * 3600))
                .expect("gc"),
            0
        );
        assert_eq!(
            store
                .delete_older_than(Duration::from_secs(3600))
                .expect("gc"),
            1
        );
        assert_eq!(store.get_run(&old).expect("get"), None);
        assert_eq!(
            store
                .read_chunks(&old, &ChunkFilter::default(), None, 10)
                .expect("chunks"),
            vec![]
        );
        assert!(
            store.get_run(&old_running).expect("get").is_some(),
            "running runs stay"
        );
        assert!(store.get_run(&recent).expect("get").is_some());
        if let StoreLocation::Sqlite(db) = t.location() {
            let chunk_rows = count_rows(db, "SELECT COUNT(*) FROM transcript_chunks");
            assert_eq!(chunk_rows, 0, "chunks of deleted runs are gone");
        }
    }
);

each_history_backend!(random_writes_read_back_byte_for_byte, |t: &TestStore| {
    let store = t.open();
    let id = store.begin_run(&new_run(&["random"])).expect("begin");
    let writer = store.transcript(&id).expect("transcript");
    let mut state = 0x2545_F491_4F6C_DD1D_u64;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let stages = [None, Some("build"), Some("test")];
    let mut in_order = Vec::new();
    let mut per_key: std::collections::HashMap<(Option<&str>, Stream), Vec<u8>> =
        std::collections::HashMap::new();
    for _ in 0..1500 {
        let stage = stages[(next() % 3) as usize];
        let stream = if next() % 2 == 0 {
            Stream::Stdout
        } else {
            Stream::Stderr
        };
        let len = match next() % 10 {
            0 => 0,
            1..=7 => next() % 64,
            8 => next() % 4096,
            _ => next() % 70_000,
        } as usize;
        let bytes: Vec<u8> = if next() % 2 == 0 {
            (0..len).map(|_| next() as u8).collect()
        } else {
            b"[REDACTED:x] line\n"
                .iter()
                .copied()
                .cycle()
                .take(len)
                .collect()
        };
        writer.write(stage, stream, &bytes);
        in_order.extend_from_slice(&bytes);
        per_key
            .entry((stage, stream))
            .or_default()
            .extend_from_slice(&bytes);
    }
    writer.finish().expect("finish");

    let all = store.logs(&id, &ChunkFilter::default()).expect("logs");
    assert_eq!(
        data(&all),
        in_order,
        "the transcript in seq order is the writes in order"
    );
    for ((stage, stream), expected) in &per_key {
        let filter = ChunkFilter {
            stage: stage.map(str::to_owned),
            stream: Some(*stream),
        };
        let chunks: Vec<Chunk> = store
            .logs(&id, &filter)
            .expect("logs")
            .into_iter()
            .filter(|c| c.stage.as_deref() == *stage)
            .collect();
        assert_eq!(&data(&chunks), expected, "{stage:?} {stream:?}");
    }

    // The export decodes to the same bytes.
    let export = store.export(&id).expect("export").expect("exists");
    let mut decoded = Vec::new();
    for chunk in &export.transcript {
        match &chunk.body {
            ExportedBody::Text { text } => decoded.extend_from_slice(text.as_bytes()),
            ExportedBody::Base64 { base64 } => decoded.extend(base64_decode(base64)),
            ExportedBody::Lost { lost_bytes } => panic!("{lost_bytes} bytes lost"),
        }
    }
    assert_eq!(decoded, in_order);
});

each_history_backend!(
    a_transcript_limit_keeps_the_head_and_marks_the_rest,
    |t: &TestStore| {
        let store = t.open();
        let id = store.begin_run(&new_run(&["flood"])).expect("begin");
        let writer = store.transcript(&id).expect("transcript");
        writer.set_limit(10);
        writer.write(None, Stream::Stdout, b"12345");
        writer.write(None, Stream::Stdout, b"678");
        // Crosses the limit: the part that fits is kept.
        writer.write(None, Stream::Stdout, b"90overflow");
        writer.write(None, Stream::Stderr, b"more");
        let stats = writer.finish().expect("finish");
        assert_eq!(stats.bytes_written, 10);
        assert_eq!(stats.bytes_over_limit, 12);
        assert_eq!(stats.bytes_lost, 12);
        let chunks = store.logs(&id, &ChunkFilter::default()).expect("logs");
        assert_eq!(data(&chunks), b"1234567890");
        let lost: Vec<(Stream, u64)> = chunks
            .iter()
            .filter_map(|c| match c.body {
                ChunkBody::Lost { bytes } => Some((c.stream, bytes)),
                ChunkBody::Data(_) => None,
            })
            .collect();
        assert_eq!(lost, vec![(Stream::Stdout, 8), (Stream::Stderr, 4)]);
    }
);

use crate::fixtures::{TestStore, base64_decode, count_rows, data, each_history_backend, new_run};
