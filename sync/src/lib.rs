//! Coroutine-aware synchronisation types for swco (being written).
#![warn(missing_docs)]
