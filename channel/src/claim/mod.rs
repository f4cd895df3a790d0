//! Cursors: how one side of the ring (the producers, or the consumers)
//! claims its next position.
//!
//! * [`Single`] — one endpoint on this side: plain loads and stores, no
//!   read-modify-write at all.
//! * [`CasCursor`] — several endpoints, claiming by compare-and-swap.
//! * [`UpdtCursor`] — several endpoints, claiming with add-only `updt`.
//!
//! A cursor also counts the endpoints on its side, so that the last one to
//! go can disconnect the channel.

mod cas;
pub(crate) mod combine;
mod cursor;
mod single;
mod updt_cursor;

pub use cas::CasCursor;
pub use cursor::Cursor;
pub use single::Single;
pub use updt_cursor::UpdtCursor;
