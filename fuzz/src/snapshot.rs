// The snapshot fuzz target's run, shared (by `include!`) with the stable corpus test
// (crates/state/tests/fuzz_corpus.rs): any bytes made into a snapshot file, read with the
// reader's checks and a memory budget, and, when small, reconstructed and the result checked.
// Every refusal must be a `StateError` naming the file or a reconstruction error; a panic, an
// abort (an allocation failure) or a hang is a bug.
//
// Input: bytes starting with the magic "FRAGSNAP" are the file, verbatim (the reader's own
// checks: lengths, checksums, deflate data). Any other input is a snapshot's parts, so that
// mutations reach the header checks and the reconstruction past the checksums: the header's
// JSON up to the first 0 byte, then a 4-byte little-endian count n, then n page bytes (as many
// as there are), and whatever follows as the dirty bitmap; the target writes them as a
// well-formed container (page bytes in PAGE sections, the rest in a DIRT section when there is
// any), the header bytes as they are.

use fraglab_state::reconstruct::{reconstruct, ReconstructOptions, Reconstruction};
use fraglab_state::snapshot::{ReadLimits, Snapshot};

/// The memory budget the fuzz target reads within (a larger snapshot is refused, as with
/// `FRAGLAB_SNAPSHOT_BUDGET`).
const FUZZ_BUDGET: u64 = 256 << 20;
/// Snapshots of at most this many pfns (1 GiB machines) are reconstructed too.
const FUZZ_RECONSTRUCT_PFNS: u64 = 1 << 18;
/// The block-type fit's effort in the fuzz target (the default fit is for real machines).
const FUZZ_SWAPS: u64 = 4000;

/// What [`snapshot_run`] did with an input.
#[derive(Debug, PartialEq, Eq)]
#[allow(dead_code)]
enum SnapOutcome {
    /// The reader refused the file with a message naming it.
    Refused,
    /// Read, too large to reconstruct briefly.
    Read,
    /// Read, and the reconstruction refused it with a message.
    NotReconstructed,
    /// Read and reconstructed; the result passed its checks.
    Reconstructed,
}

/// One section of the container layout (crates/state/src/container.rs), compressed.
fn fuzz_section(out: &mut Vec<u8>, tag: &[u8; 4], raw: &[u8]) {
    use std::io::Write as _;
    let mut enc = flate2::write::DeflateEncoder::new(Vec::new(), flate2::Compression::fast());
    enc.write_all(raw).expect("writing to a Vec");
    let comp = enc.finish().expect("writing to a Vec");
    out.extend_from_slice(tag);
    out.extend_from_slice(&(raw.len() as u32).to_le_bytes());
    out.extend_from_slice(&(comp.len() as u32).to_le_bytes());
    out.extend_from_slice(&crc32fast::hash(raw).to_le_bytes());
    out.extend_from_slice(&comp);
}

/// The snapshot file [`snapshot_run`] writes for `data` (see the top of this file).
fn snapshot_file_bytes(data: &[u8]) -> Vec<u8> {
    if data.starts_with(b"FRAGSNAP") {
        return data.to_vec();
    }
    let (header, rest) = match data.iter().position(|&b| b == 0) {
        Some(i) => (&data[..i], &data[i + 1..]),
        None => (data, &[][..]),
    };
    let (n, rest) = match rest.split_first_chunk::<4>() {
        Some((n, rest)) => (u32::from_le_bytes(*n) as usize, rest),
        None => (0, rest),
    };
    let (pages, dirty) = rest.split_at(n.min(rest.len()));
    let mut out = Vec::with_capacity(data.len() + 64);
    out.extend_from_slice(b"FRAGSNAP");
    out.extend_from_slice(&1u32.to_le_bytes());
    out.extend_from_slice(&(header.len() as u32).to_le_bytes());
    out.extend_from_slice(header);
    for c in pages.chunks(fraglab_state::container::SECTION_CHUNK) {
        fuzz_section(&mut out, b"PAGE", c);
    }
    if !dirty.is_empty() {
        fuzz_section(&mut out, b"DIRT", dirty);
    }
    out.extend_from_slice(b"END\0");
    out.extend_from_slice(&[0u8; 12]);
    out
}

/// A scratch file of this process and thread (in /dev/shm when there is one).
fn fuzz_scratch_path() -> std::path::PathBuf {
    let shm = std::path::Path::new("/dev/shm");
    let dir = if shm.is_dir() { shm.to_path_buf() } else { std::env::temp_dir() };
    let thread = format!("{:?}", std::thread::current().id());
    let thread: String = thread.chars().filter(char::is_ascii_digit).collect();
    dir.join(format!("fraglab-fuzz-snapshot-{}-{thread}.fsnap", std::process::id()))
}

/// The reconstruction's invariants: every pfn of each zone is a hole, reserved, free or in
/// exactly one folio, nothing lies outside the zones, chunks and folios are naturally aligned
/// and at most order 10, and every block has one of the five types.
fn check_reconstruction(snap: &Snapshot, r: &Reconstruction) {
    let end = snap.header.end_pfn;
    assert_eq!(r.end_pfn, end);
    assert_eq!(r.block_types.len() as u64, end.div_ceil(512));
    assert!(r.block_types.iter().all(|&t| t < 5), "a block type outside 0..5");
    let mut seen = vec![0u8; end as usize];
    let mut mark = |a: u64, b: u64, what: &str| {
        assert!(a < b && b <= end, "{what} [{a}, {b}) outside 0..{end}");
        for p in a..b {
            seen[p as usize] += 1;
        }
    };
    for h in &r.holes {
        mark(h[0], h[1], "hole");
    }
    for h in &r.reserved {
        mark(h[0], h[1], "reserved range");
    }
    for f in &r.free {
        assert!(f.order <= 10 && f.pfn % (1 << f.order) == 0, "free chunk {f:?}");
        mark(f.pfn, f.pfn + (1 << f.order), "free chunk");
    }
    for f in &r.folios {
        assert!(f.order <= 10 && f.pfn % (1 << f.order) == 0, "folio {f:?}");
        mark(f.pfn, f.pfn + (1 << f.order), "folio");
    }
    let mut in_zone = vec![false; end as usize];
    for z in &r.zones {
        assert!(z.managed <= z.spanned, "zone {} managed {} of {}", z.name, z.managed, z.spanned);
        for p in z.start_pfn..z.start_pfn + z.spanned {
            in_zone[p as usize] = true;
        }
    }
    for p in 0..end as usize {
        let want = u8::from(in_zone[p]);
        assert_eq!(seen[p], want, "pfn {p} covered {} times", seen[p]);
    }
}

/// Writes `data` as a snapshot file, reads it within [`FUZZ_BUDGET`] and, when it has at most
/// [`FUZZ_RECONSTRUCT_PFNS`] pfns, reconstructs it and checks the result.
fn snapshot_run(data: &[u8]) -> SnapOutcome {
    let path = fuzz_scratch_path();
    std::fs::write(&path, snapshot_file_bytes(data)).expect("the scratch file is writable");
    let limits = ReadLimits {
        memory_budget: FUZZ_BUDGET,
        budget_source: "the fuzz target's budget".into(),
    };
    let out = match Snapshot::read_with(&path, &limits) {
        Err(e) => {
            assert_eq!(e.path, path, "the error names the file: {e}");
            assert!(!e.msg.is_empty());
            SnapOutcome::Refused
        }
        Ok(s) if s.header.end_pfn > FUZZ_RECONSTRUCT_PFNS => SnapOutcome::Read,
        Ok(s) => {
            let opt = ReconstructOptions {
                max_swaps: FUZZ_SWAPS,
                seed: 1,
                anneal_proposals: FUZZ_SWAPS,
            };
            match reconstruct(&s, &opt) {
                Ok(r) => {
                    check_reconstruction(&s, &r);
                    let _ = r.report.render();
                    SnapOutcome::Reconstructed
                }
                Err(e) => {
                    assert!(!e.is_empty());
                    SnapOutcome::NotReconstructed
                }
            }
        }
    };
    let _ = std::fs::remove_file(&path);
    out
}
