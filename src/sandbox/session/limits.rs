//! The bounds and waits a session applies to what the sandbox sends and asks for.

/// How long the entrypoint may take to answer the boot frame.
pub const BOOT_TIMEOUT_SECS: u64 = 30;
/// How long to wait for the exit code once the output stream has ended.
pub const EXIT_CODE_WAIT_MS: u64 = 1500;
/// Sandbox requests in flight at once per session; more wait for room ([`MAX_QUEUED_CALLS`]).
pub const MAX_IN_FLIGHT_CALLS: usize = 256;
/// Sandbox requests waiting for room in flight, at most, per session; more are refused with an
/// error reply.
pub const MAX_QUEUED_CALLS: usize = 4096;
/// Stderr lines kept for error messages.
pub const STDERR_TAIL_LINES: usize = 20;
/// Longest stderr line kept (longer ones are cut).
pub const STDERR_LINE_MAX: usize = 2000;
/// Frames queued for the container's stdin before writers wait.
pub const WRITE_QUEUE: usize = 256;

/// Bounds a session applies to what the sandbox sends and asks for.
#[derive(Debug, Clone, Copy)]
pub struct SessionLimits {
    /// Largest frame accepted from the sandbox, in bytes.
    pub max_frame: usize,
    /// The container's memory limit in bytes (to explain an exit 137).
    pub memory_bytes: u64,
    /// Bytes of replies queued for the sandbox before further replies become errors.
    pub max_pending_results: usize,
}
