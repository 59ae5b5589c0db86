//! The sandbox's private network namespace, made by a thread of PID 1 while PID 1 builds the
//! root when another CPU is idle, else by PID 1 once the root is built.
//!
//! Creating a network namespace is the slowest single step of a sandbox's start (the kernel
//! registers a loopback device and a set of sysctl tables for it: about 0.4 ms on the
//! project's VM, where the whole root takes about 0.5 ms). Made by whoever clones the
//! sandbox's namespaces, it delays everything after it. Made by a thread, it runs on another
//! CPU at the same time as the mounts; PID 1 then joins it (`setns`) before it starts the
//! program, which is never started outside it. With no CPU idle the thread only waits for
//! one, and PID 1 waits for it: beside one busy CPU of two it cost about 1.3 ms more than
//! making the namespace in line (measured with one binary, BENCHMARKS.md round eight), so
//! [`start`] asks the machine first.
//!
//! The thread finds the namespace for PID 1 without a path: the socket it configured the
//! loopback device with belongs to the new namespace, and `SIOCGSKNS` turns a socket into a
//! descriptor of its namespace (PID 1's root is being replaced meanwhile; a `/proc` path
//! would depend on which root it is resolved in).

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;

use crate::error::Setup;
use crate::plan::NetworkThread;
use crate::sys;

/// The thread's stack: it makes four system calls.
const STACK_BYTES: usize = 64 * 1024;

/// A private network namespace being made, or made already.
#[derive(Debug)]
pub struct PendingNetwork(Pending);

#[derive(Debug)]
enum Pending {
    /// The thread making it, unless the caller claims the work first (see
    /// [`PendingNetwork::enter`]).
    Thread(Claimable<Setup<OwnedFd>>),
    /// Made by the thread that calls [`PendingNetwork::enter`], when it gets there.
    Later,
}

/// Starts making a private network namespace (loopback up), on a thread of its own as
/// `choice` says ([`NetworkThread::Auto`]: when another CPU is idle, [`another_cpu_is_idle`]).
/// Call [`PendingNetwork::enter`] before anything runs that must be inside it.
///
/// Otherwise (and whatever `choice` says, when `may_use_thread` is false, when the C
/// library's record of this thread's id is stale, see [`libc_knows_its_thread_id`], or when no
/// thread can be started) the namespace is made by the thread that calls `enter`, when it
/// gets there. (The caller passes `may_use_thread` false under a limit that counts tasks,
/// which would count the thread: it is gone from its process when joined, but the kernel
/// releases it a moment later.)
pub fn start(choice: NetworkThread, may_use_thread: bool) -> PendingNetwork {
    let wanted = may_use_thread
        && match choice {
            NetworkThread::Never => false,
            NetworkThread::Always => true,
            NetworkThread::Auto => another_cpu_is_idle(),
        };
    if !wanted || !libc_knows_its_thread_id() {
        return PendingNetwork(Pending::Later);
    }
    let builder = std::thread::Builder::new()
        .name("cordon-network".into())
        .stack_size(STACK_BYTES);
    match Claimable::spawn(builder, || (), make) {
        Ok(thread) => PendingNetwork(Pending::Thread(thread)),
        Err(_) => PendingNetwork(Pending::Later),
    }
}

/// Whether a CPU the calling thread may run on is idle while it runs: fewer tasks are
/// runnable on the whole machine (this one included, `/proc/loadavg`'s fourth field, counted
/// at the moment it is read) than there are CPUs in the calling thread's affinity mask.
///
/// It counts the whole machine: a CPU quota on an enclosing cgroup is not read (a job of a
/// few milliseconds rarely exhausts one).
///
/// A thread helps only then. Measured with one binary (BENCHMARKS.md, "Sandbox start-up,
/// round eight"): on an idle machine the thread's namespace beside the mounts saved
/// 0.2-0.4 ms, but beside one busy CPU of two it cost about 1.3 ms over making it in line (it
/// waits for a CPU, and so does PID 1 when it waits for the thread to end). `false` when
/// either count cannot be read.
fn another_cpu_is_idle() -> bool {
    let Some(running) = running_tasks() else {
        return false;
    };
    // SAFETY: an all-zero cpu_set_t is an empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: the calling thread (0) and a valid out-pointer of the given size.
    let r = unsafe { libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) };
    if r != 0 {
        return false;
    }
    // SAFETY: a valid, initialized set.
    let cpus = usize::try_from(unsafe { libc::CPU_COUNT(&set) }).unwrap_or(0);
    idle_cpu_left(running, cpus)
}

/// Whether `running` runnable tasks (the caller among them) leave a CPU of `cpus` idle.
fn idle_cpu_left(running: usize, cpus: usize) -> bool {
    cpus >= 2 && running < cpus
}

/// The number of runnable tasks on the machine now, from `/proc/loadavg` (read into a buffer
/// on the stack: nothing allocated in PID 1, whose heap is a copy-on-write copy of cordon's).
fn running_tasks() -> Option<usize> {
    // SAFETY: a NUL-terminated constant path.
    let fd = unsafe { libc::open(c"/proc/loadavg".as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC) };
    if fd < 0 {
        return None;
    }
    let mut buf = [0u8; 128];
    // SAFETY: reading into a live buffer of the given length.
    let n = unsafe { libc::read(fd, buf.as_mut_ptr().cast(), buf.len()) };
    sys::close(fd);
    parse_running(buf.get(..usize::try_from(n).ok()?)?)
}

/// The fourth field's first number of a `/proc/loadavg` line ("0.52 0.58 0.59 2/345 12345").
fn parse_running(loadavg: &[u8]) -> Option<usize> {
    let field = loadavg.split(|b| b.is_ascii_whitespace()).nth(3)?;
    let (running, _) = std::str::from_utf8(field).ok()?.split_once('/')?;
    running.parse().ok()
}

/// Work that a thread of its own starts, unless its creator claims it first: exactly one of
/// the two does it.
#[derive(Debug)]
struct Claimable<T> {
    thread: JoinHandle<Option<T>>,
    claimed: Arc<AtomicBool>,
    /// Keeps a thread that found the work taken from ending until [`Claimable::finish`] lets
    /// it go and waits for it: no thread is left behind for the program to find, in the host's
    /// network namespace, which it could read through `/proc/<its id>/net`. (Dropped without
    /// `finish`, on a set-up error, the thread is let go unwaited: no program starts then.)
    leave: std::sync::mpsc::Sender<()>,
}

/// Who did a [`Claimable`]'s work.
enum Done<T> {
    /// The creator, in [`Claimable::finish`].
    Here(T),
    /// The thread.
    There(T),
}

impl<T: Send + 'static> Claimable<T> {
    /// Starts a thread built by `builder` that runs `gate`, then `work` unless it was claimed.
    /// The thread starts with every signal blocked.
    fn spawn(
        builder: std::thread::Builder,
        gate: impl FnOnce() + Send + 'static,
        work: fn() -> T,
    ) -> std::io::Result<Claimable<T>> {
        let claimed = Arc::new(AtomicBool::new(false));
        let theirs = Arc::clone(&claimed);
        let (leave, may_leave) = std::sync::mpsc::channel::<()>();
        let body = move || {
            gate();
            if theirs.swap(true, Ordering::AcqRel) {
                // Taken: wait until `finish` lets this thread end.
                let _ = may_leave.recv();
                return None;
            }
            Some(work())
        };
        // The thread takes no signal meant for the process (a thread inherits its creator's
        // mask). PID 1 waits for its signals with `sigwaitinfo`: one taken by a thread that
        // does not block it would be lost (SIGCHLD) or act on the whole process (SIGTERM), and
        // the thread may outlive the set-up (see `finish`).
        let all = sys::full_sigset();
        let mut old = sys::empty_sigset();
        // SAFETY: valid sigset pointers.
        unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, &all, &mut old) };
        let spawned = builder.spawn(body);
        // SAFETY: as above; restores the caller's mask.
        unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, &old, std::ptr::null_mut()) };
        Ok(Claimable {
            thread: spawned?,
            claimed,
            leave,
        })
    }

    /// The work's result: done `here`, by the calling thread, when the thread has not begun
    /// it (every other CPU busy, it is still waiting for one: waiting for it would only add
    /// its wait); otherwise the thread's, waited for. Either way the thread has ended when
    /// this returns. `Err` if the thread panicked.
    fn finish(self, here: impl FnOnce() -> T) -> Result<Done<T>, &'static str> {
        if !self.claimed.swap(true, Ordering::AcqRel) {
            let done = here();
            // The thread waits for `leave` (or has not started): alive, it can be moved onto
            // this CPU, which is idle while this thread waits for it to end.
            run_here(&self.thread);
            drop(self.leave);
            return match self.thread.join() {
                Ok(_) => Ok(Done::Here(done)),
                Err(_) => Err("the thread panicked"),
            };
        }
        drop(self.leave);
        match self.thread.join() {
            Ok(Some(done)) => Ok(Done::There(done)),
            // It claimed the work before us, so it did it.
            Ok(None) => Err("the thread neither did its work nor left it"),
            Err(_) => Err("the thread panicked"),
        }
    }
}

/// Lets a live thread (one that cannot end before this returns) run only on the CPU the
/// calling thread is on, so that it runs as soon as the caller waits for it. Best effort.
fn run_here<T>(thread: &JoinHandle<T>) {
    use std::os::unix::thread::JoinHandleExt;
    // SAFETY: no arguments.
    let Ok(here) = usize::try_from(unsafe { libc::sched_getcpu() }) else {
        return;
    };
    // SAFETY: an all-zero cpu_set_t is an empty set.
    let mut only_here: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: `here` is a CPU number the kernel returned (the macro checks the bound).
    unsafe { libc::CPU_SET(here, &mut only_here) };
    // SAFETY: a live thread of this process (the caller guarantees it) and a valid set.
    unsafe {
        libc::pthread_setaffinity_np(
            thread.as_pthread_t(),
            std::mem::size_of::<libc::cpu_set_t>(),
            &only_here,
        )
    };
}

impl PendingNetwork {
    /// Waits for the namespace and moves the calling thread into it; fails if it could not be
    /// made or entered (the program must then not be started).
    ///
    /// When the thread has not begun yet, the calling thread makes the namespace itself
    /// ([`Claimable::finish`]).
    pub fn enter(self) -> Setup<()> {
        let thread = match self.0 {
            Pending::Later => return make().map(drop),
            Pending::Thread(thread) => thread,
        };
        let socket = match thread
            .finish(make)
            .map_err(|e| format!("make the private network namespace: {e}"))?
        {
            // Made by this thread, which is in it.
            Done::Here(made) => return made.map(drop),
            Done::There(made) => made?,
        };
        // SAFETY: SIOCGSKNS takes no argument and returns a new descriptor.
        let ns = unsafe { libc::ioctl(socket.as_raw_fd(), libc::SIOCGSKNS as _) };
        let ns = sys::check(ns.into(), || {
            "find the private network namespace (SIOCGSKNS)".into()
        })?;
        // SAFETY: the ioctl returned a new descriptor, owned by nothing else.
        let ns = unsafe { OwnedFd::from_raw_fd(ns as i32) };
        // SAFETY: two integer arguments; `ns` is a live namespace descriptor.
        let r = unsafe { libc::setns(ns.as_raw_fd(), libc::CLONE_NEWNET) };
        sys::check(r.into(), || "enter the private network namespace".into())?;
        Ok(())
    }
}

/// Whether the C library's record of the calling thread's id (at the address it gave the
/// kernel with `set_tid_address`) is the kernel's. It is not in a process made by a bare
/// `clone` (without [`libc_thread_id_record`]'s flags): the record still holds the parent's
/// id, and glibc identifies the owner of a recursive mutex by it, so a thread started there
/// could take a lock this thread holds (when its id happens to be the stale one).
fn libc_knows_its_thread_id() -> bool {
    match rustix::thread::get_clear_child_tid_address() {
        Ok(Some(at)) => {
            // SAFETY: the address glibc registered for this thread: the id field of its thread
            // record, an aligned `pid_t` that lives as long as the thread.
            let recorded = unsafe { std::ptr::read_volatile(at.as_ptr().cast::<libc::pid_t>()) };
            recorded == rustix::thread::gettid().as_raw_nonzero().get()
        }
        _ => false,
    }
}

/// The `clone` flags and child-tid argument that have the kernel write the child's own
/// thread id into the C library's record of it, as glibc's `fork` does (see
/// [`libc_knows_its_thread_id`]). `(0, 0)` where the record's address cannot be had (a
/// kernel without `PR_GET_TID_ADDRESS`), or where `clone` orders its arguments otherwise.
pub fn libc_thread_id_record() -> (libc::c_int, usize) {
    #[cfg(target_arch = "x86_64")]
    if let Ok(Some(at)) = rustix::thread::get_clear_child_tid_address() {
        return (
            libc::CLONE_CHILD_SETTID | libc::CLONE_CHILD_CLEARTID,
            at.as_ptr() as usize,
        );
    }
    (0, 0)
}

/// Moves the calling thread into a new network namespace and brings its loopback device up;
/// returns the socket that did it (it belongs to the new namespace).
fn make() -> Setup<OwnedFd> {
    // SAFETY: integer argument only.
    let r = unsafe { libc::unshare(libc::CLONE_NEWNET) };
    sys::check(r.into(), || "create the network namespace".into())?;
    loopback_up()
}

/// Brings the loopback device of the calling thread's network namespace up; returns the
/// socket used.
fn loopback_up() -> Setup<OwnedFd> {
    // SAFETY: socket with constant arguments.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    sys::check(fd.into(), || "open a socket to configure loopback".into())?;
    // SAFETY: a new descriptor, owned by nothing else.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    // SAFETY: an all-zero ifreq is valid.
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    for (dst, src) in req.ifr_name.iter_mut().zip(b"lo\0") {
        *dst = *src as libc::c_char;
    }
    // SAFETY: `req` is a valid ifreq for these ioctls.
    let r = unsafe { libc::ioctl(fd.as_raw_fd(), libc::SIOCGIFFLAGS, &mut req) };
    sys::check(r.into(), || "read loopback flags".into())?;
    // SAFETY: ifru_flags is the member SIOCGIFFLAGS filled in.
    unsafe {
        req.ifr_ifru.ifru_flags |= (libc::IFF_UP | libc::IFF_RUNNING) as libc::c_short;
    }
    // SAFETY: as above.
    let r = unsafe { libc::ioctl(fd.as_raw_fd(), libc::SIOCSIFFLAGS, &req) };
    sys::check(r.into(), || "bring loopback up".into())?;
    Ok(fd)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn affinity_of(thread: libc::pthread_t) -> libc::cpu_set_t {
        // SAFETY: an all-zero cpu_set_t is an empty set.
        let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
        let size = std::mem::size_of::<libc::cpu_set_t>();
        // SAFETY: a live thread and a valid out-pointer of the given size.
        let r = unsafe { libc::pthread_getaffinity_np(thread, size, &mut set) };
        assert_eq!(r, 0, "pthread_getaffinity_np");
        set
    }

    fn gettid() -> i32 {
        rustix::thread::gettid().as_raw_nonzero().get()
    }

    fn cpus(set: &libc::cpu_set_t) -> Vec<usize> {
        // SAFETY: reads bits of a valid set, below CPU_SETSIZE.
        (0..libc::CPU_SETSIZE as usize)
            .filter(|&c| unsafe { libc::CPU_ISSET(c, set) })
            .collect()
    }

    #[test]
    fn loadavg_gives_the_running_tasks() {
        assert_eq!(parse_running(b"0.52 0.58 0.59 2/345 12345\n"), Some(2));
        assert_eq!(parse_running(b"0.00 0.00 0.00 1/80 7"), Some(1));
        assert_eq!(parse_running(b"0.52 0.58 0.59"), None);
        assert_eq!(parse_running(b"0.52 0.58 0.59 x/345 1"), None);
        assert_eq!(parse_running(b"0.52 0.58 0.59 2345 1"), None);
        assert_eq!(parse_running(b""), None);
        // This machine's own: at least this test's thread runs.
        assert!(running_tasks().is_some_and(|n| n >= 1));
    }

    #[test]
    fn a_thread_only_where_a_cpu_is_left_idle() {
        assert!(idle_cpu_left(1, 2));
        assert!(!idle_cpu_left(2, 2));
        assert!(!idle_cpu_left(3, 2));
        assert!(!idle_cpu_left(1, 1));
        assert!(!idle_cpu_left(1, 0));
        assert!(idle_cpu_left(7, 8));
        assert!(!idle_cpu_left(8, 8));
    }

    #[test]
    fn the_creator_does_the_work_the_thread_has_not_begun() {
        static DONE_BY_THREAD: AtomicBool = AtomicBool::new(false);
        static THREAD_ENDED: AtomicBool = AtomicBool::new(false);
        /// Dropped when its thread ends (thread-local destructors run before a join returns).
        struct EndOfThread;
        impl Drop for EndOfThread {
            fn drop(&mut self) {
                THREAD_ENDED.store(true, Ordering::SeqCst);
            }
        }
        thread_local! { static END: EndOfThread = const { EndOfThread }; }
        fn work() -> &'static str {
            DONE_BY_THREAD.store(true, Ordering::SeqCst);
            "thread"
        }
        let (tid_tx, tid) = std::sync::mpsc::channel();
        let (open, gate) = std::sync::mpsc::channel::<()>();
        let claimable = Claimable::spawn(
            std::thread::Builder::new(),
            move || {
                END.with(|_| ());
                tid_tx.send(gettid()).unwrap();
                let _ = gate.recv();
            },
            work,
        )
        .expect("a thread starts");
        let tid = tid.recv().unwrap();
        // SAFETY: the calling thread, no arguments.
        let creator = || cpus(&affinity_of(unsafe { libc::pthread_self() }));
        let before = creator();
        // The gate opens once the creator has taken the work: the thread then finds it taken.
        match claimable.finish(move || {
            drop(open);
            "here"
        }) {
            Ok(Done::Here("here")) => {}
            _ => panic!("the creator did not do the work"),
        }
        // It was waited for (it is not left behind, in the host's network namespace), without
        // doing the work.
        assert!(
            THREAD_ENDED.load(Ordering::SeqCst),
            "finish returned before the thread ended"
        );
        // (Its entry in /proc goes a moment after `join` returns: the kernel wakes the joiner
        // early in the thread's exit.)
        let task = format!("/proc/self/task/{tid}");
        wait_for(|| !std::path::Path::new(&task).exists());
        assert!(!DONE_BY_THREAD.load(Ordering::SeqCst));
        // Moving the thread onto the creator's CPU left the creator's own CPUs alone.
        assert_eq!(creator(), before);
    }

    #[test]
    fn the_creator_waits_for_the_work_the_thread_has_begun() {
        fn work() -> &'static str {
            "thread"
        }
        let claimable =
            Claimable::spawn(std::thread::Builder::new(), || (), work).expect("a thread starts");
        wait_for(|| claimable.claimed.load(Ordering::SeqCst));
        match claimable.finish(|| panic!("done twice")) {
            Ok(Done::There("thread")) => {}
            _ => panic!("the thread's result was not returned"),
        }
    }

    #[test]
    fn the_thread_blocks_every_signal_and_its_creator_keeps_its_mask() {
        fn work() -> libc::sigset_t {
            let mut mask = sys::empty_sigset();
            // SAFETY: valid out-pointer; a null new set only reads the mask.
            unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, std::ptr::null(), &mut mask) };
            mask
        }
        let mut before = sys::empty_sigset();
        // SAFETY: as above.
        unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, std::ptr::null(), &mut before) };
        let claimable =
            Claimable::spawn(std::thread::Builder::new(), || (), work).expect("a thread starts");
        wait_for(|| claimable.claimed.load(Ordering::SeqCst));
        let Ok(Done::There(theirs)) = claimable.finish(work) else {
            panic!("the thread did not do the work");
        };
        let mut after = sys::empty_sigset();
        // SAFETY: as above.
        unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, std::ptr::null(), &mut after) };
        for sig in [
            libc::SIGCHLD,
            libc::SIGTERM,
            libc::SIGINT,
            libc::SIGHUP,
            libc::SIGQUIT,
            libc::SIGUSR1,
            libc::SIGUSR2,
        ] {
            // SAFETY: valid sets and signal numbers.
            unsafe {
                assert_eq!(libc::sigismember(&theirs, sig), 1, "signal {sig}");
                assert_eq!(
                    libc::sigismember(&after, sig),
                    libc::sigismember(&before, sig),
                    "signal {sig}"
                );
            }
        }
    }

    /// Until `done` holds (at most 30 s: a thread that never gets there fails the test).
    fn wait_for(done: impl Fn() -> bool) {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        while !done() {
            assert!(std::time::Instant::now() < deadline, "waited in vain");
            std::thread::yield_now();
        }
    }
}
