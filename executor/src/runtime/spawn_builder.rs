//! One spawn with more than a closure: a name, a stack size of its own, an
//! executor of its choice ([`SpawnBuilder`]). Its input is checked before
//! anything is queued, so a bad size or executor is a [`SpawnError`].

use std::panic::Location;

use super::Runtime;
use crate::error::SpawnError;
use crate::join::JoinHandle;
use crate::spawning::SpawnOptions;
use crate::stack::{page_size, MIN_STACK_SIZE};

/// Configures one spawn: [`name`](SpawnBuilder::name),
/// [`stack_size`](SpawnBuilder::stack_size),
/// [`on`](SpawnBuilder::on) (an executor); then
/// [`spawn`](SpawnBuilder::spawn). Made by [`Runtime::spawn_builder`].
///
/// A builder that sets nothing spawns as [`Runtime::try_spawn`] does, at
/// the same cost: a name is carried only when set, and only a stack larger
/// than the runtime's takes another path.
///
/// ```
/// use swco_executor::{Runtime, SpawnError};
///
/// let rt = Runtime::builder().executors(2).build().unwrap();
/// let h = rt.spawn_builder().name("reader").on(0).spawn(|| 1).unwrap();
/// assert_eq!((h.name(), h.cpe()), (Some("reader"), Some(0)));
/// assert_eq!(h.join().unwrap(), 1);
///
/// // Bad input is an error, not a panic.
/// let e = rt.spawn_builder().on(2).spawn(|| ()).unwrap_err();
/// assert_eq!(e, SpawnError::OutOfRange { cpe: 2, executors: 2 });
/// let e = rt.spawn_builder().stack_size(100).spawn(|| ()).unwrap_err();
/// assert!(matches!(e, SpawnError::StackTooSmall { requested: 100, .. }));
/// ```
#[derive(Debug, Clone)]
#[must_use = "a spawn builder does nothing until `spawn` is called"]
pub struct SpawnBuilder<'rt> {
    runtime: &'rt Runtime,
    name: Option<Box<str>>,
    stack_size: Option<usize>,
    cpe: Option<usize>,
}

impl<'rt> SpawnBuilder<'rt> {
    pub(super) fn new(runtime: &'rt Runtime) -> Self {
        SpawnBuilder {
            runtime,
            name: None,
            stack_size: None,
            cpe: None,
        }
    }

    /// Names the coroutine: [`JoinHandle::name`] returns it, and so does
    /// [`current_name`](crate::current_name) inside the coroutine.
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into().into_boxed_str());
        self
    }

    /// Usable bytes of the coroutine's stack, at least (rounded up to whole
    /// pages; a guard page lies below, as for every coroutine stack).
    ///
    /// Up to the runtime's [`stack_size`](Runtime::stack_size), the
    /// coroutine gets a stack from its executor's pool, of the runtime's
    /// size: asking for less saves nothing. A larger size gets a stack of
    /// its own, mapped when the coroutine first runs and unmapped when it
    /// finishes; if it cannot be mapped then, the coroutine is refused
    /// ([`JoinError::is_refused`](crate::JoinError::is_refused)).
    ///
    /// Less than [`MIN_STACK_SIZE`] is a [`SpawnError::StackTooSmall`], more
    /// than an address space holds a [`SpawnError::StackTooLarge`], both
    /// from [`spawn`](SpawnBuilder::spawn).
    pub fn stack_size(mut self, bytes: usize) -> Self {
        self.stack_size = Some(bytes);
        self
    }

    /// Pins the coroutine to executor `cpe`, as
    /// [`Runtime::spawn_on`]; by default the placement policy chooses. An
    /// index out of range is a [`SpawnError::OutOfRange`] from
    /// [`spawn`](SpawnBuilder::spawn).
    pub fn on(mut self, cpe: usize) -> Self {
        self.cpe = Some(cpe);
        self
    }

    /// Spawns `f` as configured. The handle records the caller
    /// ([`JoinHandle::spawned_at`]).
    ///
    /// # Errors
    ///
    /// [`SpawnError::StackTooSmall`] or [`SpawnError::StackTooLarge`] for a
    /// bad [`stack_size`](SpawnBuilder::stack_size),
    /// [`SpawnError::OutOfRange`] for a bad [`on`](SpawnBuilder::on),
    /// [`SpawnError::ShutDown`] after shutdown. Nothing is spawned then.
    #[track_caller]
    pub fn spawn<F, T>(self, f: F) -> Result<JoinHandle<T>, SpawnError>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        let at = Location::caller();
        let stack_size = match self.stack_size {
            None => 0,
            Some(requested) => {
                check_stack_size(requested)?;
                // The pool's stacks serve sizes up to theirs.
                if requested <= self.runtime.stack_size() {
                    0
                } else {
                    requested
                }
            }
        };
        let options = SpawnOptions {
            at,
            name: self.name,
            stack_size,
        };
        let (shared, own) = self.runtime.spawn_context();
        match self.cpe {
            Some(cpe) => shared.submit(cpe, f, own, false, options),
            None => {
                let (cpe, stealable) = shared.place();
                shared.submit(cpe, f, own, stealable, options)
            }
        }
    }
}

/// Checks a requested stack size as the runtime builder does: at least
/// [`MIN_STACK_SIZE`], and small enough that the page-rounded stack and its
/// guard fit in an address space.
fn check_stack_size(requested: usize) -> Result<(), SpawnError> {
    if requested < MIN_STACK_SIZE {
        return Err(SpawnError::StackTooSmall {
            requested,
            minimum: MIN_STACK_SIZE,
        });
    }
    let page = page_size();
    let fits = requested
        .checked_next_multiple_of(page)
        .and_then(|s| s.checked_add(2 * page))
        .is_some_and(|total| total <= isize::MAX as usize);
    if fits {
        Ok(())
    } else {
        Err(SpawnError::StackTooLarge { requested })
    }
}

/// Here rather than with the rest of `Runtime` (`mod.rs`), which then
/// does not name the spawn builder.
impl Runtime {
    /// A builder for one spawn with a name, a stack size of its own, or an
    /// executor of its choice; see [`SpawnBuilder`].
    ///
    /// ```
    /// # use swco_executor::Runtime;
    /// let rt = Runtime::builder().executors(2).build().unwrap();
    /// let h = rt
    ///     .spawn_builder()
    ///     .name("parser")
    ///     .stack_size(1 << 20)
    ///     .on(1)
    ///     .spawn(|| swco_executor::current_name())
    ///     .unwrap();
    /// assert_eq!(h.name(), Some("parser"));
    /// assert_eq!(h.join().unwrap().as_deref(), Some("parser"));
    /// ```
    pub fn spawn_builder(&self) -> SpawnBuilder<'_> {
        SpawnBuilder::new(self)
    }
}
