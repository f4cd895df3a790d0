//! # swco — stackful coroutines and channels, modelled on the Sunway SW26010
//!
//! See the README for an overview. The channel crate is re-exported as
//! [`channel`].

/// Bounded ring-buffer channels in four modes, with CAS and add-only
/// protocols. See [`swco_channel`].
pub use swco_channel as channel;
