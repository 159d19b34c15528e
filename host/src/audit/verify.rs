//! `toolgate audit verify`: check the chain and the signatures of one or
//! more files of a record, and name the first broken record.
//!
//! How each kind of tampering shows:
//!
//! | tampering | what breaks | reported record |
//! | --- | --- | --- |
//! | a byte changed in a record | its hash: the next record's `prev` no longer matches | the changed record |
//! | a byte changed in a `prev` | that record's link | that record |
//! | a byte changed in a checkpoint | its signature | the checkpoint |
//! | a record deleted | the sequence: a number is missing | the missing number |
//! | two records swapped | the sequence | the first out of place |
//! | the tail cut | the end: no `shutdown` checkpoint last | the first missing number |
//! | a rotated file deleted | a gap between files, or the oldest file not starting the chain at record 1 | the first missing number; the file's name |
//! | everything rewritten and re-signed | the key differs from the one pinned with `--key` | the first checkpoint |
//!
//! A rotated file's name holds the seq of its last record
//! (`PATH.<12 digits>`), so a gap of records between two files, or before
//! the oldest, names the file that held them. An operator who pruned old
//! files on purpose says where what is kept begins ([`VerifyOptions::from`],
//! `--from N`); nothing else accepts a chain that does not start at record
//! 1.
//!
//! A call's intent (`started`) and its final record (`call`, naming the
//! intent) are matched: an intent never finished is a call the host began
//! and never ended — killed mid-call, or stopped while it ran — and is
//! reported as such ([`Report::unfinished`]), not as tampering; a final
//! record that names no open intent of its own call is a break.
//!
//! Replicas each keep their own chain, and every record names its
//! replica: files of several replicas given at once are sorted into one
//! chain per replica ([`chains`]) and each is verified on its own
//! ([`verify_replicas`]); one chain does not vouch for another.
//!
//! A cut tail looks like a host killed mid-run (the record cannot tell
//! them apart): both end without a `shutdown` checkpoint, and both are
//! reported; `--allow-open` accepts such an end (a live host's file).

use std::io::BufRead;
use std::path::{Path, PathBuf};

use serde::Serialize;
use serde_json::Value;

use super::chain::{self, GENESIS};
use super::key;

/// What to check beyond the chain.
#[derive(Clone, Debug, Default)]
pub struct VerifyOptions {
    /// The public key every checkpoint must be signed with.
    pub key: Option<[u8; 32]>,
    /// Accept a record that does not end with a `shutdown` checkpoint.
    pub allow_open: bool,
    /// The first record the files must hold (files before it were pruned
    /// on purpose); `None`: record 1, the chain's start.
    pub from: Option<u64>,
}

/// A call started (its intent recorded) and never finished.
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Unfinished {
    /// The seq of its `started` record.
    pub seq: u64,
    pub call_id: String,
    pub tool: String,
    /// The host instance that started it.
    pub inst: String,
    pub ts: u64,
}

/// The verdict (`--json` prints it).
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Report {
    pub intact: bool,
    /// Records verified (the intact prefix, when broken).
    pub records: u64,
    /// The first record that is broken or missing.
    pub first_broken: Option<u64>,
    pub reason: Option<String>,
    /// The files, in chain order.
    pub files: Vec<PathBuf>,
    /// Signed checkpoints verified, and the last one's seq.
    pub checkpoints: u64,
    pub last_checkpoint: Option<u64>,
    /// Records after the last signed checkpoint.
    pub unsigned_tail: u64,
    /// The public keys that signed checkpoints.
    pub keys: Vec<String>,
    /// The record ends with a `shutdown` checkpoint.
    pub clean_end: bool,
    /// `start` records after a host that did not shut down cleanly.
    pub unclean_restarts: Vec<u64>,
    /// Bytes of a partial last line (a write cut short).
    pub partial_tail_bytes: u64,
    /// Calls started and never finished (their intent has no final
    /// record): a host killed mid-call, or stopped while they ran — or
    /// still running them (a live host's file).
    pub unfinished: Vec<Unfinished>,
    /// Rotated files known to be missing (named from the records around
    /// the gap).
    pub missing_files: Vec<PathBuf>,
}

/// Why files could not be read at all.
#[derive(Debug, thiserror::Error)]
#[error("cannot read {path}: {source}")]
pub struct ReadError {
    pub path: PathBuf,
    #[source]
    pub source: std::io::Error,
}

struct Line {
    file: usize,
    number: usize,
    text: String,
}

/// Read the lines of `path`; returns the length of a partial last line
/// (no newline: a write cut short), which is not among them.
fn read_lines(path: &Path, file: usize, out: &mut Vec<Line>) -> Result<u64, ReadError> {
    let bytes = std::fs::read(path).map_err(|source| ReadError {
        path: path.into(),
        source,
    })?;
    let complete = bytes.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
    if complete > 0 {
        // Without the final newline: the pieces are exactly the lines.
        for (i, line) in bytes[..complete - 1].split(|&b| b == b'\n').enumerate() {
            out.push(Line {
                file,
                number: i + 1,
                text: String::from_utf8_lossy(line).into_owned(),
            });
        }
    }
    Ok((bytes.len() - complete) as u64)
}

/// The first record of `path`, if it can be read as one.
fn first_record(path: &Path) -> Option<Value> {
    let f = std::fs::File::open(path).ok()?;
    let mut first = String::new();
    std::io::BufReader::new(f).read_line(&mut first).ok()?;
    serde_json::from_str::<Value>(&first).ok()
}

fn first_seq(path: &Path) -> u64 {
    first_record(path)
        .and_then(|r| r["seq"].as_u64())
        .unwrap_or(u64::MAX)
}

/// One replica's chain among files of several: its files, and whom the
/// records name.
#[derive(Clone, Debug, PartialEq)]
pub struct Chain {
    /// The replica its first records name (`None`: records written before
    /// they named one).
    pub replica: Option<String>,
    pub files: Vec<PathBuf>,
}

/// Sorts files of one or more replicas into their chains: each replica
/// keeps its own chain (its own file, rotated), and every record names
/// its replica, so a file goes to the chain of the replica its first
/// record names. A file whose first record names none (written before
/// records named one, or unreadable) belongs to the only replica named
/// when there is one — one replica's record verifies exactly as before —
/// else to a chain of its own (`replica: None`). Chains come sorted by
/// replica, their files in chain order.
pub fn chains(files: &[PathBuf]) -> Vec<Chain> {
    let mut named: std::collections::BTreeMap<String, Vec<PathBuf>> = Default::default();
    let mut unnamed = Vec::new();
    for f in files {
        match first_record(f).and_then(|r| r["replica"].as_str().map(String::from)) {
            Some(replica) => named.entry(replica).or_default().push(f.clone()),
            None => unnamed.push(f.clone()),
        }
    }
    if named.len() == 1 {
        named.values_mut().for_each(|v| v.append(&mut unnamed));
    }
    let mut out: Vec<Chain> = named
        .into_iter()
        .map(|(replica, files)| Chain {
            replica: Some(replica),
            files,
        })
        .collect();
    if !unnamed.is_empty() {
        out.insert(
            0,
            Chain {
                replica: None,
                files: unnamed,
            },
        );
    }
    for c in &mut out {
        chain_order(&mut c.files);
    }
    out
}

/// One chain's verdict among several.
#[derive(Clone, Debug, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ChainReport {
    pub replica: Option<String>,
    #[serde(flatten)]
    pub report: Report,
}

/// Verify the files of several replicas: each replica's chain on its own
/// ([`chains`], then [`verify`] for each), one verdict per chain.
pub fn verify_replicas(
    files: &[PathBuf],
    options: &VerifyOptions,
) -> Result<Vec<ChainReport>, ReadError> {
    chains(files)
        .into_iter()
        .map(|c| {
            Ok(ChainReport {
                replica: c.replica,
                report: verify(&c.files, options)?,
            })
        })
        .collect()
}

/// Puts the files of one record (a rotated chain) in chain order: by the
/// `seq` of each one's first line, read once per file; unreadable ones
/// last.
pub fn chain_order(files: &mut [PathBuf]) {
    files.sort_by_cached_key(|p| first_seq(p));
}

/// Whether `name` is a rotated file's: `<name>.<12 digits>`.
fn rotation_of(name: &str) -> Option<(&str, u64)> {
    let (base, digits) = name.rsplit_once('.')?;
    if digits.len() != 12 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some((base, digits.parse().ok()?))
}

/// The path of the live file of the record `path` belongs to.
fn live_path(path: &Path) -> PathBuf {
    match path
        .file_name()
        .and_then(|n| n.to_str())
        .and_then(rotation_of)
    {
        Some((base, _)) => path.with_file_name(base),
        None => path.to_path_buf(),
    }
}

/// `files` and, for each that is a record's live file (`PATH`, not
/// `PATH.<12 digits>`), its rotated files beside it: a record's file
/// stands for the whole record. A file given twice (or found and given)
/// is listed once.
pub fn with_rotations(files: &[PathBuf]) -> Vec<PathBuf> {
    let key = |p: &Path| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
    let mut seen: std::collections::HashSet<PathBuf> = Default::default();
    let mut out = Vec::new();
    let mut add = |p: PathBuf, out: &mut Vec<PathBuf>| {
        if seen.insert(key(&p)) {
            out.push(p);
        }
    };
    for f in files {
        add(f.clone(), &mut out);
        let Some(name) = f.file_name().and_then(|n| n.to_str()) else {
            continue;
        };
        if rotation_of(name).is_some() {
            continue;
        }
        let dir = match f.parent() {
            Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
            _ => PathBuf::from("."),
        };
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        let mut rotated: Vec<PathBuf> = entries
            .filter_map(|e| e.ok())
            .filter_map(|e| e.file_name().into_string().ok())
            .filter(|n| rotation_of(n).is_some_and(|(base, _)| base == name))
            .map(|n| f.with_file_name(n))
            .collect();
        rotated.sort();
        for r in rotated {
            add(r, &mut out);
        }
    }
    out
}

/// What the files before record `seq` held, and where it begins: the
/// rotated file that held record `seq - 1`, named from `at_file`.
fn missing_before(at_file: &Path, seq: u64) -> PathBuf {
    super::writer::rotated_name(&live_path(at_file), seq - 1)
}

/// Verify `files` (in any order: they are put in chain order by their
/// first record).
pub fn verify(files: &[PathBuf], options: &VerifyOptions) -> Result<Report, ReadError> {
    let mut files = files.to_vec();
    chain_order(&mut files);
    let mut lines = Vec::new();
    let mut partial = 0;
    for (i, f) in files.iter().enumerate() {
        partial = read_lines(f, i, &mut lines)?;
    }
    let mut report = Report {
        files: files.clone(),
        ..Report::default()
    };
    let broken = |report: &mut Report, seq: u64, reason: String| {
        report.intact = false;
        report.first_broken = Some(seq);
        report.reason = Some(reason);
    };
    let mut expected: Option<u64> = None;
    let mut prev_hash: Option<[u8; 32]> = None;
    let mut last_kind = String::new();
    // Intents not yet finished, by seq; the first record verified.
    let mut open: std::collections::BTreeMap<u64, Unfinished> = Default::default();
    let mut chain_start: Option<u64> = None;
    let parse = |l: &Line| serde_json::from_str::<Value>(&l.text).ok();
    for (i, line) in lines.iter().enumerate() {
        let at = format!("{} line {}", files[line.file].display(), line.number);
        let want = expected.unwrap_or(1);
        let Some(v) = parse(line) else {
            broken(
                &mut report,
                want,
                format!("{at} is not a JSON record (record {want} was changed or cut)"),
            );
            return Ok(report);
        };
        let Some(seq) = v["seq"].as_u64() else {
            broken(
                &mut report,
                want,
                format!("{at} has no seq (record {want} was changed)"),
            );
            return Ok(report);
        };
        if expected.is_none() {
            let from = options.from.unwrap_or(1).max(1);
            if seq > from {
                let file = missing_before(&files[line.file], seq);
                let why = format!(
                    "records {from}–{} are missing: the chain given begins at record {seq} ({at}), and the \
                     rotated file that held record {} ({}) was deleted or not given{}",
                    seq - 1,
                    seq - 1,
                    file.display(),
                    if from == 1 {
                        format!(
                            ". If the files before it were pruned on purpose, verify what is left with --from {seq}"
                        )
                    } else {
                        String::new()
                    }
                );
                report.missing_files.push(file);
                broken(&mut report, from, why);
                return Ok(report);
            }
        }
        if expected.is_some() && seq != want && line.number == 1 && seq > want {
            // A gap at a file's start: a rotated file between the two is
            // gone.
            let file = missing_before(&files[line.file], seq);
            let why = format!(
                "records {want}–{} are missing between {} and {}: the rotated file that held record {} ({}) \
                 was deleted or not given",
                seq - 1,
                files[lines[i - 1].file].display(),
                files[line.file].display(),
                seq - 1,
                file.display()
            );
            report.missing_files.push(file);
            broken(&mut report, want, why);
            return Ok(report);
        }
        if expected.is_some() && seq != want {
            let next_is_want = lines
                .get(i + 1)
                .and_then(parse)
                .and_then(|n| n["seq"].as_u64())
                == Some(want);
            let why = if next_is_want {
                format!("{at} holds record {seq} where {want} belongs: records were reordered")
            } else if seq > want {
                format!(
                    "record {want} is missing ({at} holds {seq} right after {}): records were deleted",
                    want - 1
                )
            } else {
                format!(
                    "{at} holds record {seq} where {want} belongs: records were duplicated or reordered"
                )
            };
            broken(&mut report, want, why);
            return Ok(report);
        }
        let Some(prev) = v["prev"].as_str().and_then(chain::unhex::<32>) else {
            broken(
                &mut report,
                seq,
                format!("{at} (record {seq}) has no valid prev"),
            );
            return Ok(report);
        };
        let linked = match prev_hash {
            Some(h) => prev == h,
            // The first record given: a new chain starts at 1 from
            // GENESIS; a later file alone continues one not given.
            None => seq != 1 || prev == GENESIS,
        };
        if !linked {
            // Either the record before changed (then this one's successor
            // still links to this one) or this one's prev did.
            let this_hash = chain::sha256(line.text.as_bytes());
            let next_links = lines
                .get(i + 1)
                .and_then(parse)
                .and_then(|n| n["prev"].as_str().and_then(chain::unhex::<32>))
                .is_some_and(|p| p == this_hash);
            let (bad, why) = if next_links && seq > 1 {
                (
                    seq - 1,
                    format!(
                        "record {} was changed: its hash is not the prev of record {seq} ({at})",
                        seq - 1
                    ),
                )
            } else {
                (
                    seq,
                    format!(
                        "record {seq} ({at}) was changed: it does not link to record {}",
                        seq.saturating_sub(1)
                    ),
                )
            };
            broken(&mut report, bad, why);
            return Ok(report);
        }
        let kind = v["kind"].as_str().unwrap_or("").to_string();
        if matches!(kind.as_str(), "checkpoint" | "rotate" | "shutdown") {
            let Some((unsigned, sig)) = chain::split_sig(&line.text) else {
                broken(
                    &mut report,
                    seq,
                    format!("checkpoint {seq} ({at}) has no signature in place"),
                );
                return Ok(report);
            };
            let Some(public) = v["key"].as_str().and_then(chain::unhex::<32>) else {
                broken(
                    &mut report,
                    seq,
                    format!("checkpoint {seq} ({at}) names no key"),
                );
                return Ok(report);
            };
            if let Some(pinned) = options.key
                && pinned != public
            {
                broken(
                    &mut report,
                    seq,
                    format!(
                        "checkpoint {seq} ({at}) is signed with key {}, not the pinned key {}: the record was re-signed by someone else",
                        chain::hex(&public),
                        chain::hex(&pinned)
                    ),
                );
                return Ok(report);
            }
            if !key::verify(&public, unsigned.as_bytes(), &sig) {
                broken(
                    &mut report,
                    seq,
                    format!(
                        "checkpoint {seq} ({at}): the signature does not verify (the checkpoint was changed)"
                    ),
                );
                return Ok(report);
            }
            let hex_key = chain::hex(&public);
            if !report.keys.contains(&hex_key) {
                report.keys.push(hex_key);
            }
            report.checkpoints += 1;
            report.last_checkpoint = Some(seq);
            report.unsigned_tail = 0;
        } else {
            report.unsigned_tail += 1;
        }
        // A rotated file ends with its `rotate` checkpoint; only there.
        let last_of_file = lines.get(i + 1).is_none_or(|n| n.file != line.file);
        if kind == "rotate" && lines.get(i + 1).is_none() {
            // The record went on in a file after this one: the next
            // rotated file, or the live file.
            let why = format!(
                "{at}: the record goes on after this rotate checkpoint (record {seq}) in a file not given: \
                 the next rotated file or the live file ({}) was deleted or not given",
                live_path(&files[line.file]).display()
            );
            broken(&mut report, seq + 1, why);
            return Ok(report);
        }
        if (kind == "rotate") != (last_of_file && line.file + 1 < files.len()) {
            let why = if kind == "rotate" {
                format!("{at}: records follow the rotate checkpoint {seq} in its file")
            } else {
                format!(
                    "{at}: the file ends at record {seq} without its rotate checkpoint (its tail was cut)"
                )
            };
            broken(&mut report, seq + u64::from(kind != "rotate"), why);
            return Ok(report);
        }
        if kind == "start" && v["previous"]["clean"] == Value::Bool(false) {
            report.unclean_restarts.push(seq);
        }
        if kind == "started" {
            open.insert(
                seq,
                Unfinished {
                    seq,
                    call_id: v["callId"].as_str().unwrap_or("").to_string(),
                    tool: v["tool"].as_str().unwrap_or("").to_string(),
                    inst: v["inst"].as_str().unwrap_or("").to_string(),
                    ts: v["ts"].as_u64().unwrap_or(0),
                },
            );
        } else if kind == "call"
            && let Some(named) = v.get("intent")
        {
            let first = *chain_start.get_or_insert(seq);
            let why = match named.as_u64() {
                None => Some(format!("{at} (record {seq}) names no valid intent")),
                Some(n) if n >= seq => Some(format!(
                    "{at} (record {seq}) names intent {n}, which follows it: an intent comes before its call's final record"
                )),
                Some(n) => match open.remove(&n) {
                    Some(started)
                        if v["callId"] == started.call_id.as_str()
                            && v["tool"] == started.tool.as_str()
                            && v["inst"] == started.inst.as_str() =>
                    {
                        None
                    }
                    Some(started) => Some(format!(
                        "{at} (record {seq}) finishes call {} ({}) but names the intent of call {} ({}), record {n}",
                        v["callId"].as_str().unwrap_or(""),
                        v["tool"].as_str().unwrap_or(""),
                        started.call_id,
                        started.tool
                    )),
                    // Before the files given (pruned, or a later file alone):
                    // nothing to match it with.
                    None if n < first => None,
                    None => Some(format!(
                        "{at} (record {seq}) names intent {n}, which is not a call started and not yet finished"
                    )),
                },
            };
            if let Some(why) = why {
                broken(&mut report, seq, why);
                return Ok(report);
            }
        }
        chain_start.get_or_insert(seq);
        prev_hash = Some(chain::sha256(line.text.as_bytes()));
        expected = Some(seq + 1);
        last_kind = kind;
        report.records += 1;
    }
    report.clean_end = last_kind == "shutdown" && partial == 0;
    report.partial_tail_bytes = partial;
    report.unfinished = open.into_values().collect();
    report.intact = true;
    if partial > 0 && !options.allow_open {
        let next = expected.unwrap_or(1);
        broken(
            &mut report,
            next,
            format!(
                "the record ends with a partial line of {partial} byte(s) where record {next} was being written \
                 (a crash or a full disk; the next start of the host cuts it off and says so)"
            ),
        );
    } else if !report.clean_end && !options.allow_open {
        let next = expected.unwrap_or(1);
        let why = format!(
            "the record ends at {} without a shutdown checkpoint ({} record(s) after the last signed checkpoint{}): \
                 records after it were cut, or the host is still running or was killed (--allow-open accepts an open end)",
            if next > 1 {
                format!("record {}", next - 1)
            } else {
                "its start".to_string()
            },
            report.unsigned_tail,
            report
                .last_checkpoint
                .map(|s| format!(", record {s}"))
                .unwrap_or_default()
        );
        broken(&mut report, next, why);
    }
    Ok(report)
}
