//! The `cordon` binary: dispatches the hidden helper entry points before anything else starts
//! (no thread, no runtime), then hands over to the CLI.
//!
//! `main` is the C entry point itself (`no_main`): std's runtime start-up is skipped. It reads
//! and parses `/proc/self/maps` (to place the main thread's stack-overflow guard) and sets up
//! an alternate signal stack: 110 K instructions, 8 % of a Rust hello world's CPU, at every one
//! of the thousands of starts a day. What of it matters is done here: SIGPIPE is ignored (a
//! write to a closed pipe fails with `EPIPE`, as in any Rust program) and `process::exit`
//! flushes stdout. A stack overflow then ends the process with SIGSEGV, without std's message.
//
// In a static x86_64 Linux build the executable's entry point is `cordon_entry` (below), which
// runs before the C library's `_start`.
// (The test harness of this binary brings its own `main`.)
#![cfg_attr(not(test), no_main)]
#![cfg_attr(test, allow(unused_imports))]

use std::ffi::{c_char, c_int};
use std::process::ExitCode;

#[cfg(not(test))]
#[unsafe(no_mangle)]
extern "C" fn main(_argc: c_int, _argv: *const *const c_char) -> c_int {
    // SAFETY: making a signal ignored runs no code.
    unsafe { libc::signal(libc::SIGPIPE, libc::SIG_IGN) };
    let code = cordon::main();
    // `ExitCode` keeps its number private: find it among the 256 it can be.
    let code = (0..=255u8)
        .find(|&c| ExitCode::from(c) == code)
        .map_or(1, i32::from);
    std::process::exit(code)
}

// The executable's entry point on x86_64 Linux with glibc, linked statically (`build.rs` passes
// `--entry=cordon_entry`):
// it asks the kernel for private copies of the writable segments in one `madvise
// (MADV_POPULATE_WRITE)` each, then jumps to the C library's `_start` as if the kernel had
// started there.
//
// Why: the first thing a static-pie executable does is relocate itself, writing a pointer
// into every page of `.data.rel.ro` (288 KiB here: vtables, `&str` tables, panic locations).
// Each first write to a page of the file's private mapping is a page fault that copies the
// page; on the machine of BENCHMARKS.md (a VM with cgroup-v1 memory accounting) such a fault
// costs 1.5-2 µs, and there are about 70 of them at every start. Populated in one system call,
// the same copies cost about 30 µs less ("Sandbox start-up, round nine"). Nothing else can do
// it earlier: the C library relocates before any constructor or `main` runs, and no code that
// needs a relocation may run before that, hence assembly that only reads its own program
// headers (position-independent: `__ehdr_start` is addressed relative to the instruction).
//
// The registers the kernel set for `_start` are kept (`rdx`, the `atexit` function of a
// dynamic loader, is saved in `r12` across the system call; `rsp` is not touched). A kernel
// without `MADV_POPULATE_WRITE` (before 5.14) returns `EINVAL`, and the pages are then copied
// as they are written, as before. The program headers are read where the kernel mapped them
// (`__ehdr_start` + `e_phoff`); the load bias is `__ehdr_start`'s address less the `p_vaddr`
// of the `PT_LOAD` that maps the file from offset 0 (the one holding the ELF header), and
// without such a segment nothing is populated.
// Built wherever `build.rs` may pass `--entry` (its link arguments also reach this binary's
// unit-test harness, hence no `not(test)`).
#[cfg(all(target_arch = "x86_64", target_os = "linux", target_env = "gnu"))]
core::arch::global_asm!(
    ".globl cordon_entry",
    ".type cordon_entry, @function",
    "cordon_entry:",
    "    mov r12, rdx",
    "    lea r13, [rip + __ehdr_start]",
    "    mov r14, [r13 + 32]",             // e_phoff
    "    add r14, r13",                    // the program headers, as mapped
    "    movzx r15d, word ptr [r13 + 56]", // e_phnum
    // Find the PT_LOAD (1) with p_offset 0: the load bias is __ehdr_start less its p_vaddr.
    "    mov rcx, r14",
    "    mov r8d, r15d",
    "2:",
    "    test r8d, r8d",
    "    jz 5f",
    "    cmp dword ptr [rcx], 1",
    "    jne 7f",
    "    cmp qword ptr [rcx + 8], 0",
    "    je 3f",
    "7:",
    "    add rcx, 56",
    "    dec r8d",
    "    jmp 2b",
    "3:",
    "    mov r9, r13",
    "    sub r9, [rcx + 16]",
    // Every PT_LOAD (1) with PF_W (2): populate [p_vaddr, p_vaddr + p_memsz), page-aligned.
    "4:",
    "    test r15d, r15d",
    "    jz 5f",
    "    cmp dword ptr [r14], 1",
    "    jne 6f",
    "    test dword ptr [r14 + 4], 2",
    "    jz 6f",
    "    mov rdi, [r14 + 16]",
    "    add rdi, r9",
    "    mov rsi, [r14 + 40]",
    "    lea rsi, [rsi + rdi + 4095]",
    "    and rdi, -4096",
    "    and rsi, -4096",
    "    sub rsi, rdi",
    "    mov edx, 23", // MADV_POPULATE_WRITE
    "    mov eax, 28", // SYS_madvise
    "    syscall",
    "6:",
    "    add r14, 56",
    "    dec r15d",
    "    jmp 4b",
    "5:",
    "    mov rdx, r12",
    "    jmp _start",
    ".size cordon_entry, . - cordon_entry",
);
