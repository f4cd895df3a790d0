//! Why a [`World`](crate::World) could not start.

use std::fmt;

/// Why [`World::init`](crate::World::init) failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InitError {
    /// MPI was initialised already (by another `World` or by hand).
    AlreadyInitialized,
    /// MPI granted a thread level below `Multiple` (the level it granted).
    ThreadLevel(String),
    /// The bridge could not start or died during start-up.
    Bridge(String),
}

impl fmt::Display for InitError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            InitError::AlreadyInitialized => write!(f, "MPI is already initialised"),
            InitError::ThreadLevel(l) => {
                write!(f, "MPI granted thread level {l}, swco-mpi needs Multiple")
            }
            InitError::Bridge(e) => write!(f, "the MPI bridge failed: {e}"),
        }
    }
}

impl std::error::Error for InitError {}
