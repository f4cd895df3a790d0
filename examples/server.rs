//! A Go-style server loop: one coroutine serves requests that carry their
//! own reply channel, waiting with `select!` on the request channel and a
//! quit channel at once, with a timeout arm that does housekeeping when no
//! request comes. Clients are coroutines that send a request and wait for
//! the reply with `recv_timeout`, so a lost server would be an error, not a
//! hang. Shutdown is clean: once every client has its answers, the main
//! thread sends on the quit channel and the server returns its log.
//!
//! Every reply is checked, and so is the server's count of requests
//! served; the program exits nonzero on a wrong answer.
//!
//! ```text
//! cargo run --release --example server [-- CLIENTS REQUESTS_PER_CLIENT]
//! ```

use std::time::Duration;

use swco::channel::{mpsc, spsc, RecvTimeoutError};
use swco::Runtime;

/// A request: a number to double and where to send the answer.
struct Request {
    n: u64,
    reply: spsc::Sender<u64>,
}

/// What the server did before it was told to quit.
struct ServerLog {
    served: u64,
    idle_ticks: u64,
}

fn serve(requests: mpsc::Receiver<Request>, quit: spsc::Receiver<()>) -> ServerLog {
    let mut log = ServerLog {
        served: 0,
        idle_ticks: 0,
    };
    loop {
        swco::select! {
            recv(requests) -> req => match req {
                Ok(Request { n, reply }) => {
                    // A client that gave up has dropped its receiver: not
                    // the server's problem.
                    let _ = reply.send(2 * n);
                    log.served += 1;
                }
                // Every client's sender is gone: nobody can ask any more.
                Err(_) => return log,
            },
            recv(quit) -> _ => return log,
            // Nothing for a while: a Go server would flush caches or
            // log statistics here.
            default(Duration::from_millis(20)) => log.idle_ticks += 1,
        }
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let clients: u64 = args.next().map_or(Ok(8), |a| a.parse())?;
    let per_client: u64 = args.next().map_or(Ok(1_000), |a| a.parse())?;

    let rt = Runtime::builder().executors(2).build()?;
    let (requests_tx, requests_rx) = mpsc::bounded::<Request>(16);
    let (quit_tx, quit_rx) = spsc::bounded::<()>(1);
    let server = rt.spawn(move || serve(requests_rx, quit_rx));

    let handles: Vec<_> = (0..clients)
        .map(|c| {
            let requests = requests_tx.clone();
            rt.spawn(move || -> Result<u64, RecvTimeoutError> {
                let mut total = 0;
                for i in 0..per_client {
                    let n = c * per_client + i;
                    let (reply, answer) = spsc::bounded(1);
                    requests
                        .send(Request { n, reply })
                        .expect("the server quit early");
                    let got = answer.recv_timeout(Duration::from_secs(30))?;
                    assert_eq!(got, 2 * n, "reply to request {n}");
                    total += got;
                }
                Ok(total)
            })
        })
        .collect();

    let mut total = 0;
    for h in handles {
        total += h.join()??;
    }
    // Every client has its answers; the server still holds `requests_tx`'s
    // clone here, so it is the quit channel that ends it.
    quit_tx.send(())?;
    let log = server.join()?;
    drop(requests_tx);
    rt.shutdown();

    let requests = clients * per_client;
    println!(
        "{requests} requests from {clients} clients served; {} idle ticks",
        log.idle_ticks
    );
    assert_eq!(log.served, requests, "requests served");
    assert_eq!(total, requests * (requests - 1), "sum of the replies");
    Ok(())
}
