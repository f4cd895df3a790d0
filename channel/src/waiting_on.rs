//! How a blocked channel operation describes itself in a dump (the
//! descriptor types are the blocking layer's: `swco_wait::waiting_on`).

use std::fmt;
use std::panic::Location;

/// Describes operation `op` on a channel of mode `mode` and protocol
/// `protocol`.
pub(crate) fn describe_channel(
    f: &mut fmt::Formatter<'_>,
    op: impl fmt::Display,
    mode: &str,
    protocol: &str,
    capacity: usize,
    made_at: &Location<'_>,
) -> fmt::Result {
    write!(
        f,
        "{op} on {mode} channel ({protocol}, capacity {capacity}) made at {}:{}",
        made_at.file(),
        made_at.line()
    )
}
