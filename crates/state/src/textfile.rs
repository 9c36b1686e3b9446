//! Small text files read whole (result JSONs, compare reports, suite files), bounded: what is
//! not a regular file is refused before it is opened (a FIFO with no writer would block, a
//! device such as `/dev/zero` never ends), and a file larger than the bound is refused by its
//! size before any byte is read.

use std::io::Read as _;
use std::path::Path;

use crate::StateError;

/// The largest run result or compare report read (the repository's largest kernel result is
/// about 4 MiB).
pub const MAX_RESULT_BYTES: u64 = 256 << 20;

/// Reads `path` whole as UTF-8 text, at most `max` bytes; `what` names the kind of file in
/// errors ("result JSON"). Errors name the file.
pub fn read_text(path: &Path, max: u64, what: &str) -> Result<String, StateError> {
    crate::trace::check_regular_file(path, what)?;
    let len = std::fs::metadata(path)
        .map_err(|e| StateError::new(path, None, format!("cannot open: {e}")))?
        .len();
    if len > max {
        return Err(StateError::new(
            path,
            None,
            format!("{len} bytes: more than a {what}'s {max}"),
        ));
    }
    let f =
        std::fs::File::open(path).map_err(|e| StateError::new(path, None, format!("cannot open: {e}")))?;
    let mut buf = Vec::with_capacity(len as usize);
    // The file may have grown since its size was read: still at most `max` (+1 to notice).
    f.take(max + 1)
        .read_to_end(&mut buf)
        .map_err(|e| StateError::new(path, Some(buf.len() as u64), format!("read failed: {e}")))?;
    if buf.len() as u64 > max {
        return Err(StateError::new(
            path,
            Some(max),
            format!("more than a {what}'s {max} bytes"),
        ));
    }
    String::from_utf8(buf).map_err(|e| {
        StateError::new(
            path,
            Some(e.utf8_error().valid_up_to() as u64),
            format!("not UTF-8 text (a {what} is)"),
        )
    })
}
