//! Guest budgets: every limit the host enforces on what a component does and
//! returns, in one place.
//!
//! Components are third-party code. Whatever they do — loop, allocate, return
//! a hundred megabytes, log a million lines — must cost the host a bounded
//! amount of time, memory and attention. Each field below states the threat
//! it answers, its default, and the `toolgate.toml` key that changes it
//! (`docs/operators/configuration.md` lists the same numbers). Oversized answers are
//! refused or truncated *at the boundary*, before anything else in the host
//! sees them, and the error names the component that produced them.
//!
//! ```
//! use toolgate::budgets::Budgets;
//! let b = Budgets::default();
//! assert_eq!(b.max_content_blocks, 1024);
//! assert_eq!(b.policy_timeout.as_millis(), 2_000);
//! ```

use std::time::Duration;

use toolgate_schema::derive::Schema;

/// Limits on guest calls and guest-provided data.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Budgets {
    /// Time one policy invocation may take (pre-execute and post-execute
    /// hooks, guards, finalizers, observers) and one of a tool's helper
    /// exports (`render`, its own `finalize-content`, `present-*`). A
    /// waterfall hook also gets the budgets of the listeners after it.
    /// Threat: a policy that loops stalls every call. Default 2000 ms;
    /// `policy_timeout_ms`.
    pub policy_timeout: Duration,
    /// The deadline of a call whose tool declares no `timeout-ms` (and the
    /// operator sets none in `[tools.NAME]`): every call has one. Threat: a
    /// body that never returns holds a slot and its memory forever. Default
    /// 600000 ms (10 minutes); `[limits] default_tool_timeout_ms`.
    pub default_tool_timeout: Duration,
    /// What the host adds to a tool's declared `timeout-ms` for its own,
    /// hard deadline of the call: the timeout policy (when installed) fires
    /// first and reports the tool's budget; the host's deadline stops the
    /// call even when no timeout policy is installed. 1000 ms.
    pub deadline_grace: Duration,
    /// Time to load one plugin: instantiate it and run `list-tools`.
    /// Plugins load in parallel, so one slow plugin delays only itself.
    /// Threat: a component that loops at load stalls the host's start.
    /// Default 5000 ms; `[limits] load_timeout_ms`.
    pub load_timeout: Duration,
    /// Time `is-concurrency-safe` may take; a slower answer makes the call
    /// exclusive (fail closed). 250 ms; not configurable (it sits on the
    /// path of every call).
    pub classify_timeout: Duration,
    /// Bytes of linear memory all instances of all plugins may hold at once.
    /// A `memory.grow` beyond it fails and the guest traps with an error
    /// naming this budget. Threat: many warm or parallel instances, each
    /// within its own cap, together exhaust the host. Default 2048 MiB;
    /// `[limits] guest_memory_mb`.
    pub guest_memory_bytes: usize,
    /// Content blocks in one result (a tool's, a wrapper's, a finalizer's,
    /// a post-execute hook's). Threat: a million tiny blocks. Default 1024;
    /// `[limits] max_content_blocks`.
    pub max_content_blocks: usize,
    /// Bytes of content in one result, all blocks together (text, image and
    /// audio bytes, resources). Default 8 MiB; `[limits] max_content_bytes`.
    pub max_content_bytes: usize,
    /// Bytes of one guest-provided sentence: a denial reason, an `ask`
    /// prompt, a block's feedback, a failure message, a card's text. Longer
    /// ones are cut, with a note of how much was cut. Default 16 KiB;
    /// `[limits] max_message_bytes`.
    pub max_message_bytes: usize,
    /// Bytes of a tool's description. A longer one is cut (the model sees
    /// every description on every turn). Default 32 KiB;
    /// `[limits] max_description_bytes`.
    pub max_description_bytes: usize,
    /// Bytes of a tool's parameters or output schema, as JSON text. A
    /// larger one is refused at load. Default 256 KiB;
    /// `[limits] max_schema_bytes`.
    pub max_schema_bytes: usize,
    /// Tools one component may list. More is refused at load. Default 256;
    /// `[limits] max_tools_per_plugin`.
    pub max_tools_per_plugin: usize,
    /// Bytes of one guest log line (longer ones are cut). 4 KiB.
    pub max_log_line_bytes: usize,
    /// Log lines one plugin may write per second (a burst of the same
    /// number is allowed); beyond it lines are dropped and a summary of how
    /// many were dropped is logged once the flood ends. Threat: a guest
    /// drowning the operator's log. Default 50; `[limits] log_lines_per_second`.
    pub log_lines_per_second: u32,
    /// Deferred contexts one call may add, and the bytes of each. 16 × 16 KiB.
    pub max_deferred: usize,
    /// See [`Budgets::max_deferred`].
    pub max_deferred_bytes: usize,
    /// Host handles (calls, results) one instance may hold at once.
    /// Threat: a guest that keeps every result handle it is given. 256.
    pub max_handles: usize,
    /// Bytes of a guest's stderr kept for trap reports (the tail). 4 KiB.
    pub stderr_tail_bytes: usize,
    /// Pages of one MCP server's `tools/list` the bridge reads. Threat: a
    /// server that answers every page with another cursor drove the host
    /// past 1 GB before its connect timeout. A listing that needs more is
    /// cut off and the connection fails, naming this limit. 64; not
    /// configurable.
    pub max_listing_pages: usize,
    /// Tools one MCP server's `tools/list` may hold, all pages together,
    /// counted while the pages are read (before `tools_allow` /
    /// `tools_deny` and [`Budgets::max_tools_per_plugin`], which apply to
    /// the listing read). Threat: huge pages of tiny tools. 1024; not
    /// configurable.
    pub max_listing_tools: usize,
    /// Bytes of one MCP server's `tools/list`, all pages together (each
    /// tool as JSON), counted while the pages are read. Threat: a few
    /// pages of enormous schemas or descriptions. 16 MiB; not configurable.
    pub max_listing_bytes: usize,
}

impl Default for Budgets {
    fn default() -> Self {
        Budgets {
            policy_timeout: Duration::from_millis(2_000),
            default_tool_timeout: Duration::from_millis(600_000),
            deadline_grace: Duration::from_millis(1_000),
            load_timeout: Duration::from_millis(5_000),
            classify_timeout: Duration::from_millis(250),
            guest_memory_bytes: 2048 << 20,
            max_content_blocks: 1024,
            max_content_bytes: 8 << 20,
            max_message_bytes: 16 << 10,
            max_description_bytes: 32 << 10,
            max_schema_bytes: 256 << 10,
            max_tools_per_plugin: 256,
            max_log_line_bytes: 4 << 10,
            log_lines_per_second: 50,
            max_deferred: 16,
            max_deferred_bytes: 16 << 10,
            max_handles: 256,
            stderr_tail_bytes: 4 << 10,
            max_listing_pages: 64,
            max_listing_tools: 1024,
            max_listing_bytes: 16 << 20,
        }
    }
}

// The audit record's limits (see `crate::audit` and docs/operators/audit.md, which
// states the same numbers). The record is host-written, but what goes into
// it — arguments, reasons — comes from the model and from guests, and its
// file may be shared with other hosts or tampered with: every size it holds
// or reads is capped here.

/// Records queued for the audit writer while a write is in progress. A
/// caller that finds the queue full waits for room (its result is not
/// returned before its record is written): records are never dropped, and
/// the queue's memory is bounded. 4096.
pub const AUDIT_QUEUE_RECORDS: usize = 4096;
/// Records one write of the audit record takes at most (one `write(2)`):
/// bounds the leader's buffer and the time it holds the file's lock. 1024.
pub const AUDIT_BATCH_RECORDS: usize = 1024;
/// Bytes of a call's arguments (as compact JSON) kept in its record; larger
/// arguments are recorded by their SHA-256 alone (`"argumentsOmitted":
/// "size"`, not replayable). Threat: a model (or an operator's raised
/// `max_argument_bytes`) filling the record. 256 KiB.
pub const AUDIT_MAX_ARGUMENT_BYTES: usize = 256 << 10;
/// Bytes of one record: beyond it (only reachable through many long guest
/// reasons) each decision's reason is cut to [`AUDIT_CUT_REASON_BYTES`].
/// 1 MiB.
pub const AUDIT_MAX_RECORD_BYTES: usize = 1 << 20;
/// Bytes a reason is cut to in a record over [`AUDIT_MAX_RECORD_BYTES`]. 1 KiB.
pub const AUDIT_CUT_REASON_BYTES: usize = 1 << 10;
/// Bytes of a record file's tail read at start (and when another host
/// appended) to find its last record: twice the largest record. 2 MiB.
pub const AUDIT_MAX_TAIL_READ: u64 = 2 * AUDIT_MAX_RECORD_BYTES as u64;
/// Bytes of each client-provided name in a record's `client` (the MCP
/// session id, `clientInfo` name and version); longer ones are cut. 256.
pub const AUDIT_MAX_CLIENT_FIELD_BYTES: usize = 256;
/// Characters a sensitive value (`[audit] sensitive`; with `arguments =
/// "digest"`, every value of the arguments) must have to be redacted where
/// it is quoted in a record's text (a policy's reason): a shorter one is
/// kept there — replacing every `1` or `ls` in every reason would redact
/// everything and hide nothing. The arguments themselves hide every
/// sensitive value, whatever its length. 4.
pub const AUDIT_SENSITIVE_MIN_CHARS: usize = 4;
/// Sensitive values of one call searched for in its record's text; a call
/// with more (only reachable with `arguments = "digest"` and many values)
/// has its reasons withheld whole instead. 256.
pub const AUDIT_SENSITIVE_MAX_VALUES: usize = 256;
/// Records between two signed checkpoints (`[audit] checkpoint_every`):
/// what a cut tail can take away unsigned (a checkpoint costs one
/// signature, about 20 µs). Default 1000.
pub const AUDIT_CHECKPOINT_EVERY: u64 = 1000;
/// `sync = "batch"`: the most time a written record waits for `fdatasync`
/// (`[audit] sync_interval_ms`). Default 200 ms.
pub const AUDIT_SYNC_INTERVAL_MS: u64 = 200;
/// Size at which the record's file is rotated (`[audit] rotate_mb`).
/// Default 64 MiB.
pub const AUDIT_ROTATE_MB: u64 = 64;

/// Cut `s` to at most `max` bytes (on a character boundary), saying how
/// much was cut. Returns `s` unchanged when it fits.
///
/// The note (`… [cut by the host: N bytes, limit M]`) is inside the `max`
/// bytes, not added to them; when `max` is too small for the note, the
/// text is cut to `max` bytes without it.
pub fn cut(mut s: String, max: usize) -> String {
    if s.len() <= max {
        return s;
    }
    let note = format!("… [cut by the host: {} bytes, limit {max}]", s.len());
    let (keep, note) = match max.checked_sub(note.len()) {
        Some(keep) => (keep, note),
        None => (max, String::new()),
    };
    let mut end = keep;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    s.truncate(end);
    s.push_str(&note);
    s
}

/// Paths one call may be refused for lacking an fs grant that the host
/// records (logging the first) and names in the call's error
/// ([`crate::plugin::ungranted`]); further refusals of the same call are
/// answered alike, unrecorded. Threat: a guest that probes a million paths
/// floods the log. 4; not configurable.
pub const MAX_UNGRANTED_PATHS: usize = 4;

/// Bytes of one such recorded path; a longer one is cut. 512; not
/// configurable.
pub const MAX_UNGRANTED_PATH_BYTES: usize = 512;

// The OCI limits (pulls, signatures, keyless verification) are the OCI
// crate's: named there once, and listed here with the rest.
#[cfg(feature = "oci")]
pub use toolgate_oci::budgets::*;

// The egress proxy's limits (see `crate::egress` and docs/operators/egress.md,
// "Egress", which states the same numbers). What they bound comes from a
// sandboxed process: request heads, how many connections it holds open,
// how long it keeps one silent. None is configurable.

/// Bytes of an HTTP request head (request line and headers) or a SOCKS5
/// greeting the proxy reads before refusing the connection (HTTP 431).
/// Threat: a client that never ends its headers. 64 KiB.
pub const EGRESS_MAX_HEAD_BYTES: usize = 64 << 10;
/// Header fields of one HTTP request head through the proxy (the array
/// httparse parses into, as hyper's own default); one more is refused
/// (HTTP 431). Threat: a head of thousands of tiny fields. 100.
pub const EGRESS_MAX_HEADERS: usize = 100;
/// Time a client has to send its request head (or SOCKS5 greeting and
/// request) once connected. 10 s.
pub const EGRESS_HEAD_TIMEOUT: Duration = Duration::from_secs(10);
/// Connections one sandboxed spawn may have open through its proxy at
/// once; one more is refused (HTTP 503, SOCKS5 "general failure") and
/// logged. Threat: a process exhausting the host's descriptors. 64.
pub const EGRESS_MAX_CONNECTIONS: usize = 64;
/// A connection through the proxy with no byte in either direction for
/// this long is closed. 120 s.
pub const EGRESS_IDLE_TIMEOUT: Duration = Duration::from_secs(120);
/// Time to resolve a name, and then to connect to an address. 10 s each.
pub const EGRESS_CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// Destinations (name and port) one call may ask about with `[egress] ask
/// = true`; beyond them a destination no rule allows is refused without
/// asking. Threats: a process flooding the approver (or the queue) with
/// questions, and using the names it asks about (each resolved before the
/// question) to carry data out through DNS. 16.
pub const EGRESS_MAX_ASKS_PER_CALL: usize = 16;
/// Questions about a bridged MCP server's connections (`[egress] ask =
/// true`; they belong to no single call) open at once; a connection to
/// one more destination is refused without asking. Each waits at most
/// `[approval] timeout_ms`. Threat: a server flooding the approver (or
/// the queue) with questions. 16.
pub const EGRESS_MAX_SERVER_QUESTIONS: usize = 16;

/// `[approval] timeout_ms`: how long a call waits in the approval queue
/// for a decision before it is denied (saying so). Threat: an entry nobody
/// looks at holds its call, its client and a scheduler slot forever.
/// Default 600000 ms (10 minutes).
pub const APPROVAL_TIMEOUT_MS: u64 = 600_000;
/// `[questions] timeout_ms`: how long a question (`ask_user_question`, the
/// `questions` seam) waits for its answer, whichever route asks it; then
/// the tool says nobody answered. The call's own deadline bounds it too.
/// Threat: a question nobody sees holds its call and its client. Default
/// 600000 ms (10 minutes).
pub const QUESTIONS_TIMEOUT_MS: u64 = 600_000;
/// `[approval] retry_hold_ms`: how long the retry of a call that does not
/// wait (a 2026-07-28 client's; see `approval::queue`) is held for a
/// decision before it is answered "input required" again. Threat: a held
/// request outliving the client's or a proxy's read timeout (the MCP
/// Python SDK's default is 30 s for a request; proxies often cut at 60 s),
/// and a client polling in a tight loop when it is too short. Default
/// 20000 ms (20 s).
pub const APPROVAL_RETRY_HOLD_MS: u64 = 20_000;
/// Replicas sharing an approval store: how often each looks for entries
/// overdue (their expiry passed, and the replica that asked did not end
/// them — killed, say). Threat: a killed replica's entries pending for
/// ever. 1 s; not configurable.
pub const APPROVAL_SHARED_SWEEP: Duration = Duration::from_secs(1);
/// How long past its expiry an entry is left to the replica that asked
/// before another replica ends it. 2000 ms; not configurable.
pub const APPROVAL_SHARED_GRACE_MS: u64 = 2_000;
/// Replicas sharing an approval store: how often a replica reads again the
/// entries its calls wait on, besides the change feed (which says when it
/// reconnected). Threat: a decision whose announcement was lost holding a
/// call until its timeout. 10 s; not configurable.
pub const APPROVAL_SHARED_RECHECK: Duration = Duration::from_secs(10);

/// Tasks (the MCP Tasks extension: a 2026-07-28 client's call waiting in
/// the approval queue; see `toolgate_mcp::tasks`) the host keeps at once,
/// in any state. Past it, the call is answered with an
/// `InputRequiredResult` instead (its retry works as without tasks).
/// Threat: a client creating tasks faster than they end. 1024; not
/// configurable.
pub const TASKS_MAX: usize = 1024;
/// Of those, one client's (a local user, or a peer address: see
/// `toolgate_mcp::peer`). 64; not configurable.
pub const TASKS_MAX_PER_CLIENT: usize = 64;
/// How long an ended task (completed, failed, cancelled) is kept for
/// `tasks/get`, from its end; then it is gone ("unknown task"). 600000 ms
/// (10 minutes); not configurable.
pub const TASKS_KEEP_MS: u64 = 600_000;
/// Bytes (JSON) of one task's result kept; a larger result is replaced by
/// an error result that gives its size. 1 MiB; not configurable.
pub const TASKS_MAX_RESULT_BYTES: usize = 1 << 20;
/// Bytes (JSON) of all kept results together; a result that would pass
/// it is replaced the same way. 64 MiB; not configurable.
pub const TASKS_MAX_RESULT_TOTAL_BYTES: usize = 64 << 20;
/// The `pollIntervalMs` a task suggests. 1000 ms.
pub const TASKS_POLL_INTERVAL_MS: u64 = 1000;
/// Entries pending at once in the approval queue; beyond, an `ask` is
/// denied ("the approval queue is full"). Threat: a model (or many
/// clients) flooding the queue and the store. 10000; not configurable.
pub const APPROVAL_MAX_PENDING: usize = 10_000;
/// Decided (and withdrawn, expired) entries the queue keeps as history;
/// older ones are deleted. 1000; not configurable.
pub const APPROVAL_KEEP_DECIDED: usize = 1000;
/// Grants active at once (and revoked ones kept as history). 1000; not
/// configurable.
pub const APPROVAL_MAX_GRANTS: usize = 1000;
/// The longest a grant may last. 24 hours (86400000 ms); not configurable.
pub const APPROVAL_MAX_GRANT_MS: u64 = 24 * 60 * 60 * 1000;
/// Bytes of a grant's tool, argument name, pattern, scope or client.
/// 1024; not configurable.
pub const APPROVAL_MAX_PATTERN_BYTES: usize = 1024;
/// Bytes of a denial's message (and of a hook's question) kept in an
/// entry; longer ones are cut. 4096; not configurable.
pub const APPROVAL_MAX_MESSAGE_BYTES: usize = 4096;
/// Bytes of a call's arguments (compact JSON) an entry shows; larger ones
/// are replaced by a note of their size. 65536; not configurable.
pub const APPROVAL_MAX_ARGUMENT_BYTES: usize = 64 << 10;

/// Bytes of one request body to the approval console's API. 64 KiB; not
/// configurable.
pub const CONSOLE_MAX_BODY_BYTES: usize = 64 << 10;
/// Entries (or grants) one console decision names. 1000; not configurable.
pub const CONSOLE_MAX_BATCH: usize = 1000;
/// Console logins alive at once; a new one ends the oldest. 64; not
/// configurable.
pub const CONSOLE_MAX_SESSIONS: usize = 64;
/// How long a console login lasts. 12 hours; not configurable.
pub const CONSOLE_SESSION_TTL: Duration = Duration::from_secs(12 * 60 * 60);

/// `[approval] webhook`: how long one post may take (connecting, sending,
/// the answer's head). Threat: a receiver that hangs holds up the posts
/// after it. 5 s; not configurable.
pub const APPROVAL_WEBHOOK_TIMEOUT: Duration = Duration::from_secs(5);
/// Bytes of one webhook post; an entry larger than that is posted with
/// its arguments and card replaced by a note. 256 KiB; not configurable.
pub const APPROVAL_WEBHOOK_MAX_BODY_BYTES: usize = 256 << 10;
/// New entries waiting to be posted; beyond, an entry is not posted
/// (logged; it stays pending in the console). Threat: a slow receiver
/// and a flood of entries growing memory. 256; not configurable.
pub const APPROVAL_WEBHOOK_BACKLOG: usize = 256;

/// `[auth] leeway_seconds`: the default clock skew allowed on a token's
/// `exp` and `nbf`. 60 s.
pub const AUTH_DEFAULT_LEEWAY_SECONDS: u64 = 60;
/// `[auth] leeway_seconds` at most. Threat: an expired token accepted for
/// long after its end. 300 s.
pub const AUTH_MAX_LEEWAY_SECONDS: u64 = 300;
/// Bytes of an access token the server reads; a longer `Authorization`
/// header is refused unread. 16 KiB; not configurable.
pub const AUTH_MAX_TOKEN_BYTES: usize = 16 << 10;
/// Bytes of one document from the authorization server (its metadata, its
/// key set, an introspection answer). Threat: a server (or what sits in
/// its place) flooding the host. 256 KiB; not configurable.
pub const AUTH_MAX_DOCUMENT_BYTES: usize = 256 << 10;
/// How long one request to the authorization server may take. 5 s; not
/// configurable.
pub const AUTH_FETCH_TIMEOUT: Duration = Duration::from_secs(5);
/// How long the issuer's key set is used before it is fetched again.
/// 10 minutes; not configurable.
pub const AUTH_KEYS_TTL: Duration = Duration::from_secs(600);
/// A token naming a key the set lacks fetches the set again (a rotation),
/// at most this often. Threat: tokens with made-up key ids turning every
/// request into a fetch. 30 s; not configurable.
pub const AUTH_KEYS_REFETCH_INTERVAL: Duration = Duration::from_secs(30);
/// Bytes of JSON one `[auth] claims` claim may have to be passed on to
/// policies and the record; a larger one is left out (logged). 4 KiB;
/// not configurable.
pub const AUTH_MAX_CLAIM_BYTES: usize = 4 << 10;

/// The `kv` seam: the longest key. Threat: keys as a side channel for bulk
/// data, and unbounded key listings. 256 bytes; not configurable.
pub const KV_MAX_KEY_BYTES: usize = 256;
/// The `kv` seam: the largest value. 1 MiB; not configurable.
pub const KV_MAX_VALUE_BYTES: usize = 1 << 20;
/// The `kv` seam: bytes of keys, scopes and values one plugin may hold,
/// all agent scopes together, enforced atomically by the state store (so
/// replicas sharing a store share the quota). Threat: a plugin filling the
/// host's disk or the shared store's memory. 4 MiB; not configurable.
pub const KV_QUOTA_BYTES: usize = 4 << 20;

/// The shared state store (`[state] url`): how long one connection attempt
/// may take. Threat: a store behind a black-holed route holding calls
/// until the kernel gives up (minutes). 1 s; not configurable.
pub const STATE_CONNECT_TIMEOUT: Duration = Duration::from_secs(1);
/// The shared state store: how long one operation may take, reconnecting
/// included; then it fails closed (a guard using `kv` denies). Below the
/// policy budget (2 s), so the guard gets the store's error rather than
/// its own timeout. 1000 ms; `[state] timeout_ms`.
pub const STATE_OP_TIMEOUT: Duration = Duration::from_millis(1000);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cut_keeps_short_strings_and_marks_long_ones() {
        assert_eq!(cut("short".into(), 100), "short");
        assert_eq!(cut("exact".into(), 5), "exact");
        let c = cut("é".repeat(1000), 200);
        assert!((199..=200).contains(&c.len()), "{c}"); // 2-byte characters
        assert!(
            c.ends_with("… [cut by the host: 2000 bytes, limit 200]"),
            "{c}"
        );
        assert!(c.starts_with("éé"), "{c}");
    }

    /// "At most `max` bytes" holds for every `max`, with 1- to 4-byte
    /// characters: the note counts against the limit; a limit too small
    /// for the note cuts the text alone; what is kept is a prefix, at most
    /// three bytes (a partial character) shorter than the room it had.
    #[test]
    fn cut_never_returns_more_than_max_bytes() {
        for unit in ["a", "é", "€", "🦀"] {
            let s = unit.repeat(100);
            for max in 0..s.len() {
                let c = cut(s.clone(), max);
                assert!(c.len() <= max, "{unit} max {max}: {} bytes", c.len());
                assert!(
                    c.len() + 3 >= max,
                    "{unit} max {max}: only {} bytes",
                    c.len()
                );
                let note = format!("… [cut by the host: {} bytes, limit {max}]", s.len());
                let kept = c.strip_suffix(note.as_str()).unwrap_or(&c);
                assert!(s.starts_with(kept), "{unit} max {max}: {c}");
                assert_eq!(
                    c.len() != kept.len(),
                    max >= note.len(),
                    "{unit} max {max}: {c}"
                );
            }
        }
    }
}

/// `[limits]` in the configuration: every guest budget the operator may
/// change (the fields of [`Budgets`] of the same names; the defaults are
/// documented there and in docs/operators/configuration.md).
#[derive(Clone, Debug, Default, PartialEq, serde::Deserialize, serde::Serialize, Schema)]
#[serde(deny_unknown_fields)]
#[schema(crate = "toolgate_schema::derive")]
pub struct LimitsConfig {
    /// Nesting depth of a call's arguments.
    pub max_argument_depth: Option<usize>,
    /// Size of a call's arguments, in bytes.
    pub max_argument_bytes: Option<usize>,
    /// Linear memory of all instances together, in MiB.
    pub guest_memory_mb: Option<usize>,
    /// The deadline of a call whose tool declares none, in ms.
    pub default_tool_timeout_ms: Option<u64>,
    /// Instantiate + list-tools of one plugin, in ms.
    pub load_timeout_ms: Option<u64>,
    /// Content blocks per result.
    pub max_content_blocks: Option<usize>,
    /// Content bytes per result.
    pub max_content_bytes: Option<usize>,
    /// A reason, prompt, feedback or failure message, in bytes.
    pub max_message_bytes: Option<usize>,
    /// A tool's description, in bytes (longer ones are cut).
    pub max_description_bytes: Option<usize>,
    /// A tool's parameters or output schema, in bytes.
    pub max_schema_bytes: Option<usize>,
    /// Tools one plugin may list.
    pub max_tools_per_plugin: Option<usize>,
    /// Log lines per second per plugin; the rest is dropped and counted.
    pub log_lines_per_second: Option<u32>,
}

impl LimitsConfig {
    /// The guest budgets: the defaults, with what this table sets.
    pub fn budgets(&self, policy_timeout_ms: Option<u64>) -> Budgets {
        let mut b = Budgets::default();
        if let Some(ms) = policy_timeout_ms {
            b.policy_timeout = Duration::from_millis(ms);
        }
        if let Some(ms) = self.default_tool_timeout_ms {
            b.default_tool_timeout = Duration::from_millis(ms);
        }
        if let Some(ms) = self.load_timeout_ms {
            b.load_timeout = Duration::from_millis(ms);
        }
        if let Some(mb) = self.guest_memory_mb {
            b.guest_memory_bytes = mb << 20;
        }
        macro_rules! set {
            ($($f:ident),*) => { $(if let Some(v) = self.$f { b.$f = v; })* };
        }
        set!(
            max_content_blocks,
            max_content_bytes,
            max_message_bytes,
            max_description_bytes,
            max_schema_bytes,
            max_tools_per_plugin,
            log_lines_per_second
        );
        b
    }

    /// The problems of `[limits]`: every limit is 1 or more.
    pub fn check(&self, problems: &mut Vec<String>) {
        let l = self;
        for (key, value) in [
            ("guest_memory_mb", l.guest_memory_mb.map(|v| v as u64)),
            ("default_tool_timeout_ms", l.default_tool_timeout_ms),
            ("load_timeout_ms", l.load_timeout_ms),
            ("max_content_blocks", l.max_content_blocks.map(|v| v as u64)),
            ("max_content_bytes", l.max_content_bytes.map(|v| v as u64)),
            ("max_message_bytes", l.max_message_bytes.map(|v| v as u64)),
            (
                "max_description_bytes",
                l.max_description_bytes.map(|v| v as u64),
            ),
            ("max_schema_bytes", l.max_schema_bytes.map(|v| v as u64)),
            (
                "max_tools_per_plugin",
                l.max_tools_per_plugin.map(|v| v as u64),
            ),
            (
                "log_lines_per_second",
                l.log_lines_per_second.map(u64::from),
            ),
            ("max_argument_depth", l.max_argument_depth.map(|v| v as u64)),
            ("max_argument_bytes", l.max_argument_bytes.map(|v| v as u64)),
        ] {
            crate::config::positive(&format!("/limits/{key}"), value, problems);
        }
    }
}

/// `session_list`, `session_read`, `session_search` (the `history` seam):
/// the newest MiB of the audit record one request reads (the live file,
/// then the rotated ones). Threat: a model asking for history over a
/// record of many gigabytes, holding a thread and the disk. 64 MiB.
pub const HISTORY_MAX_SCAN_MB: u64 = 64;
/// Items (sessions, calls) in one page of the `history` seam. Threat: a
/// page the size of the record in the guest's memory and the model's
/// context. 100.
pub const HISTORY_MAX_PAGE: usize = 100;
/// Bytes of calls in one page of the `history` seam (at least one call is
/// returned). 1 MiB.
pub const HISTORY_MAX_PAGE_BYTES: usize = 1 << 20;
/// Bytes of a `session_search` query. 200.
pub const HISTORY_MAX_QUERY_BYTES: usize = 200;
