//! The [`select!`](crate::select!) and
//! [`select_biased!`](crate::select_biased!) macros, over the engine in
//! `select/`, kept apart from it as crossbeam-channel keeps its
//! `select_macro.rs`.

/// Waits on a set of channel operations and runs the arm of the one
/// selected; crossbeam's `select!`, with the same syntax:
///
/// ```text
/// select! {
///     recv(rx) -> msg => body,        // msg: Result<T, RecvError>
///     send(tx, value) -> res => body, // res: Result<(), SendError<T>>
///     default => body,                // if nothing is ready now (also `default()`), or
///     default(timeout) => body,       // if nothing is ready within `timeout`
/// }
/// ```
///
/// Any number of `recv` and `send` arms, in any order, over channels of any
/// mode and protocol, mixed, capacity 0 (rendezvous) included; at most one
/// `default` arm. An arm's body is an expression (a block needs no comma
/// after it); an arm's arguments may end with a comma (`recv(rx,)`). `rx`
/// and `tx` are endpoints or references to them, each evaluated once.
///
/// If several operations are ready, one of them is selected uniformly at
/// random, wherever it sits among the arms
/// ([`select_biased!`](crate::select_biased!) takes the first instead). An
/// operation on a disconnected channel is ready (it fails: a `send` arm then
/// gets its value back in the `SendError`). Without a `default` arm the
/// select waits as long as it takes; in a swco coroutine, only the
/// coroutine waits. The bodies run after the select is over, so `break`,
/// `continue`, `return` and `?` in them act on the enclosing code.
///
/// A selected `recv` arm's message is received exactly once, and only by
/// that arm. A `send` arm's value expression is evaluated (inside a
/// closure, so no `?` or `return` in it) when that send first finds room,
/// at most once; if another sender takes the room before the value is in
/// and another arm is then selected, the value is dropped unsent.
///
/// ```
/// use std::time::Duration;
/// use swco_channel::{mpmc, select, spsc, Updt};
///
/// let (tx1, rx1) = spsc::bounded_with::<i32, Updt>(1);
/// let (tx2, rx2) = mpmc::bounded::<String>(1);
/// tx1.send(10).unwrap();
///
/// // Both operations are ready: either runs, each half of the time.
/// select! {
///     recv(rx1) -> msg => assert_eq!(msg, Ok(10)),
///     send(tx2, "hi".to_string()) -> res => {
///         assert!(res.is_ok());
///         assert_eq!(rx2.recv().unwrap(), "hi");
///     }
/// }
///
/// // Nothing ready within 1 ms.
/// let (_tx3, rx3) = spsc::bounded::<i32>(1);
/// let timed_out = select! {
///     recv(rx3) -> _ => false,
///     default(Duration::from_millis(1)) => true,
/// };
/// assert!(timed_out);
/// ```
#[macro_export]
macro_rules! select {
    ($($tokens:tt)*) => {
        $crate::__select_internal!(@parse false [] [] $($tokens)*)
    };
}

/// [`select!`](crate::select!), but when several operations are ready, the
/// first of them in the order written is selected, not a random one
/// (crossbeam's `select_biased!`; [`Select::new_biased`](crate::Select::new_biased) is its run-time
/// form). Same syntax and otherwise the same behaviour.
///
/// ```
/// use swco_channel::{mpmc, select_biased};
///
/// let (tx1, rx1) = mpmc::bounded::<i32>(1);
/// let (tx2, rx2) = mpmc::bounded::<i32>(1);
/// tx1.send(1).unwrap();
/// tx2.send(2).unwrap();
///
/// // Both ready: the first arm wins, every time.
/// let got = select_biased! {
///     recv(rx1) -> m => m.unwrap(),
///     recv(rx2) -> m => m.unwrap(),
/// };
/// assert_eq!(got, 1);
/// ```
#[macro_export]
macro_rules! select_biased {
    ($($tokens:tt)*) => {
        $crate::__select_internal!(@parse true [] [] $($tokens)*)
    };
}

/// What [`select!`](crate::select!) and
/// [`select_biased!`](crate::select_biased!) expand through. Not API.
///
/// Every rule carries `$b`, `false` for `select!` and `true` for
/// `select_biased!`, down to the code it emits.
#[doc(hidden)]
#[macro_export]
macro_rules! __select_internal {
    // ---- parsing: `@parse bias [arms] [default] tokens...` --------------
    (@parse $b:tt [$($a:tt)*] $d:tt) => {
        $crate::__select_internal!(@bind $b [] [$($a)*] $d)
    };
    (@parse $b:tt [$($a:tt)*] $d:tt recv($r:expr $(,)?) -> $p:pat => $body:expr, $($rest:tt)*) => {
        $crate::__select_internal!(@parse $b [$($a)* (recv ($r) ($p) $body)] $d $($rest)*)
    };
    (@parse $b:tt [$($a:tt)*] $d:tt recv($r:expr $(,)?) -> $p:pat => $body:expr) => {
        $crate::__select_internal!(@parse $b [$($a)* (recv ($r) ($p) $body)] $d)
    };
    (@parse $b:tt [$($a:tt)*] $d:tt recv($r:expr $(,)?) -> $p:pat => $body:block $($rest:tt)*) => {
        $crate::__select_internal!(@parse $b [$($a)* (recv ($r) ($p) $body)] $d $($rest)*)
    };
    (@parse $b:tt [$($a:tt)*] $d:tt send($s:expr, $m:expr $(,)?) -> $p:pat => $body:expr, $($rest:tt)*) => {
        $crate::__select_internal!(@parse $b [$($a)* (send ($s) ($m) ($p) $body)] $d $($rest)*)
    };
    (@parse $b:tt [$($a:tt)*] $d:tt send($s:expr, $m:expr $(,)?) -> $p:pat => $body:expr) => {
        $crate::__select_internal!(@parse $b [$($a)* (send ($s) ($m) ($p) $body)] $d)
    };
    (@parse $b:tt [$($a:tt)*] $d:tt send($s:expr, $m:expr $(,)?) -> $p:pat => $body:block $($rest:tt)*) => {
        $crate::__select_internal!(@parse $b [$($a)* (send ($s) ($m) ($p) $body)] $d $($rest)*)
    };
    // `default` and `default()` alike.
    (@parse $b:tt $a:tt [] default $(())? => $body:expr, $($rest:tt)*) => {
        $crate::__select_internal!(@parse $b $a [(now) $body] $($rest)*)
    };
    (@parse $b:tt $a:tt [] default $(())? => $body:expr) => {
        $crate::__select_internal!(@parse $b $a [(now) $body])
    };
    (@parse $b:tt $a:tt [] default $(())? => $body:block $($rest:tt)*) => {
        $crate::__select_internal!(@parse $b $a [(now) $body] $($rest)*)
    };
    (@parse $b:tt $a:tt [] default($t:expr $(,)?) => $body:expr, $($rest:tt)*) => {
        $crate::__select_internal!(@parse $b $a [(timeout $t) $body] $($rest)*)
    };
    (@parse $b:tt $a:tt [] default($t:expr $(,)?) => $body:expr) => {
        $crate::__select_internal!(@parse $b $a [(timeout $t) $body])
    };
    (@parse $b:tt $a:tt [] default($t:expr $(,)?) => $body:block $($rest:tt)*) => {
        $crate::__select_internal!(@parse $b $a [(timeout $t) $body] $($rest)*)
    };
    (@parse $b:tt $a:tt [$($d:tt)+] default $($rest:tt)*) => {
        ::core::compile_error!("select!: there can be only one `default` case")
    };
    (@parse $b:tt $a:tt $d:tt $($rest:tt)+) => {
        ::core::compile_error!(
            "select!: expected `recv(r) -> res => body`, `send(s, msg) -> res => body`, \
             `default => body` or `default(timeout) => body`"
        )
    };

    // ---- naming: one fresh identifier per arm (each expansion step has its
    // own hygiene, so the `__arm` of each step is a different variable) ----
    (@bind $b:tt [$($done:tt)*] [(recv ($r:expr) $p:tt $body:tt) $($rest:tt)*] $d:tt) => {
        $crate::__select_internal!(@bind $b
            [$($done)* (__arm [$r.__select_recv_arm()] $p $body)]
            [$($rest)*] $d)
    };
    (@bind $b:tt [$($done:tt)*] [(send ($s:expr) ($m:expr) $p:tt $body:tt) $($rest:tt)*] $d:tt) => {
        $crate::__select_internal!(@bind $b
            [$($done)* (__arm [$crate::__private::SendArm::new(&$s, || $m)] $p $body)]
            [$($rest)*] $d)
    };
    (@bind $b:tt [$($done:tt)*] [] $d:tt) => {
        $crate::__select_internal!(@emit $b [$($done)*] [$($done)*] $d)
    };

    // ---- code: each arm's state in a `match` (so temporaries in the
    // endpoint expressions live to the end), then the driver, then the
    // selected arm's body, outside any loop of ours --------------------------
    (@emit $b:tt [($arm:ident [$($ctor:tt)*] $p:tt $body:tt) $($rest:tt)*] $all:tt $d:tt) => {
        match $($ctor)* {
            mut $arm => $crate::__select_internal!(@emit $b [$($rest)*] $all $d),
        }
    };
    (@emit $b:tt [] [$(($arm:ident $ctor:tt $p:tt $body:tt))*] $d:tt) => {{
        // The first try, statically dispatched (see `FirstTry`), then, if it
        // did not complete an arm, the whole select.
        let mut __first = $crate::__select_internal!(@first $b);
        $( __first.probe($arm.probe()); )*
        let mut __done = false;
        if __first.pick() {
            $( if __first.turn() { __done = $arm.try_now(); } )*
        }
        if !__done {
            let _ = $crate::__private::run(
                &mut [$($arm.as_op()),*],
                $crate::__select_internal!(@wait $d),
                $b,
            );
        }
        $crate::__select_internal!(@dispatch [$(($arm $p $body))*] $d)
    }};

    (@first false) => {
        <$crate::__private::FirstTry as ::core::default::Default>::default()
    };
    (@first true) => { $crate::__private::FirstTry::biased() };

    (@wait []) => { $crate::__private::Wait::Forever };
    (@wait [(now) $body:tt]) => { $crate::__private::Wait::Now };
    (@wait [(timeout $t:expr) $body:tt]) => { $crate::__private::Wait::timeout($t) };

    (@dispatch [($arm:ident ($p:pat) $body:tt) $($rest:tt)*] $d:tt) => {
        if let ::core::option::Option::Some(__outcome) = $arm.take() {
            match __outcome {
                $p => $body,
            }
        } else {
            $crate::__select_internal!(@dispatch [$($rest)*] $d)
        }
    };
    (@dispatch [] []) => {
        ::core::unreachable!("select! without a default returned unselected")
    };
    (@dispatch [] [$kind:tt $body:tt]) => { $body };
}
