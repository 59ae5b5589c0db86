// Compiled (not run) by `npm run typecheck`: the package's types say what the service sends.

import {
  CordonClient,
  PolicyError,
  ConflictError,
  BusyError,
  type Finding,
  type Job,
  type JobEvent,
  type JobRequest,
  type RunReport,
  type WireState,
} from "@cordon/client";

export async function usage(client: CordonClient): Promise<string[]> {
  const request: JobRequest = { project: "web", type: "verify", inputs: { workspace: { from_job: "j-aaaaaaaaaa" } } };
  const job: Job = await client.submit(request, { idempotencyKey: "k" });
  const state: WireState = job.state;
  const report: RunReport = await client.verifyPatch({ project: "web", url: "/src/web", patch: "" });
  const findings: Finding[] = report.stages.flatMap((stage) => stage.findings ?? []);
  const places = findings.map((f) => `${f.file ?? "?"}:${f.line ?? 0} ${f.kind} ${f.message}`);
  for await (const event of client.logs(job.id)) {
    const e: JobEvent = event;
    if (e.event === "output") places.push(e.data.text);
    if (e.event === "end") places.push(e.data.state);
  }
  try {
    await client.cancel(job.id);
  } catch (error) {
    if (error instanceof PolicyError) places.push(error.rule ?? "");
    if (error instanceof ConflictError) places.push(error.existingJobId ?? "");
    if (error instanceof BusyError) places.push(String(error.retryAfter));
  }
  // @ts-expect-error: a run job's inputs need argv.
  await client.submit({ project: "web", type: "run", inputs: {} });
  // @ts-expect-error: no such state.
  const wrong: WireState = "done";
  return [...places, state, String(wrong)];
}
