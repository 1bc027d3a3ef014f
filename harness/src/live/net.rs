//! The real network, as the harness uses it live: everything on 127.0.0.1.

use std::collections::BTreeSet;
use std::io;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Mutex;

use chaos_kit::net::{BoxFuture, BoxStream, Network, TcpNetwork};
use tokio::sync::watch;

/// The only address anything of the harness listens on, and the only one it
/// tells a target to listen on.
pub(crate) const LOOPBACK: Ipv4Addr = Ipv4Addr::LOCALHOST;

/// A listener on 127.0.0.1, on a port the OS picks.
pub(crate) fn bind_loopback() -> io::Result<std::net::TcpListener> {
    std::net::TcpListener::bind(SocketAddr::from((LOOPBACK, 0)))
}

/// The slot's `listener`, for one trial's runtime: a clone, so the slot
/// keeps its port for the next trial when this runtime ends.
pub(crate) fn for_this_trial(
    listener: &std::net::TcpListener,
) -> io::Result<tokio::net::TcpListener> {
    let listener = listener.try_clone()?;
    listener.set_nonblocking(true)?;
    tokio::net::TcpListener::from_std(listener)
}

/// A free port on 127.0.0.1 for the target, released for the target to
/// bind. Never one this run handed out before: two of this run's targets
/// (`parallel = N`) must not be told the same one.
///
/// Taken below the kernel's ephemeral range when there is room there: a
/// port the OS picks is one every outgoing connection on the machine may
/// also be given as its local port, and in the time between the release and
/// the target's bind one did (a CI run's `mcp-ledger` failed with
/// `Address already in use`). Below the range only a program that picks
/// ports by hand can take it; [`taken`] tells the start to try another.
pub(crate) fn reserve_port() -> io::Result<u16> {
    static HANDED_OUT: Mutex<BTreeSet<u16>> = Mutex::new(BTreeSet::new());
    let mut handed_out = chaos_kit::sync::lock(&HANDED_OUT);
    let below = std::fs::read_to_string(EPHEMERAL_RANGE)
        .ok()
        .and_then(|text| below_ephemeral(&text));
    if let Some(ports) = below {
        // From a random place: chaos runs side by side (a test suite's)
        // reserve at the same moments, and a scan from one fixed port
        // would offer them the same ports.
        let span = u32::from(ports.end - ports.start);
        let from = rand::random_range(0..span);
        for step in 0..span {
            let port = ports.start + ((from + step) % span) as u16;
            if !handed_out.contains(&port) && !taken(port) {
                handed_out.insert(port);
                return Ok(port);
            }
        }
    }
    for _ in 0..64 {
        let listener = std::net::TcpListener::bind(SocketAddr::from((LOOPBACK, 0)))?;
        let port = listener.local_addr()?.port();
        if handed_out.insert(port) {
            return Ok(port);
        }
    }
    Err(io::Error::other(
        "the OS kept offering ports this run had already handed out",
    ))
}

/// Where Linux keeps the ports it gives outgoing connections (and `bind` to
/// port 0): two numbers, the lowest and the highest.
const EPHEMERAL_RANGE: &str = "/proc/sys/net/ipv4/ip_local_port_range";

/// The ports chaos hands out below the ephemeral range whose file reads
/// `text`: from 10000 up to the range's first port, when that leaves at
/// least 1000 (none on a machine whose range starts lower).
fn below_ephemeral(text: &str) -> Option<std::ops::Range<u16>> {
    const LOWEST: u16 = 10_000;
    let low: u16 = text.split_whitespace().next()?.parse().ok()?;
    (low >= LOWEST + 1_000).then_some(LOWEST..low)
}

/// Whether 127.0.0.1:`port` cannot be bound now (with `SO_REUSEADDR`, as
/// the targets' servers bind): a listener has it, or a connection's socket
/// does, open or closed and waiting out TIME_WAIT (60 s on Linux).
pub(crate) fn taken(port: u16) -> bool {
    std::net::TcpListener::bind(SocketAddr::from((LOOPBACK, port))).is_err()
}

/// Whether the socket listening on 127.0.0.1:`port` belongs to a process
/// of process group `group` (the target's): a `/healthz` answered on the
/// port proves nothing if another program took the port first (another
/// chaos run, a stray server), and the target failed to bind but kept
/// running. `None` when the kernel's tables cannot tell (no `/proc`).
pub(crate) fn held_by_group(port: u16, group: i32) -> Option<bool> {
    let mut inodes = Vec::new();
    for table in ["/proc/net/tcp", "/proc/net/tcp6"] {
        let text = std::fs::read_to_string(table).ok()?;
        inodes.extend(listening_inodes(&text, port));
    }
    if inodes.is_empty() {
        return Some(false);
    }
    let sockets: Vec<String> = inodes
        .iter()
        .map(|inode| format!("socket:[{inode}]"))
        .collect();
    let members = std::fs::read_dir("/proc")
        .ok()?
        .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| process_group(*pid) == Some(group));
    for pid in members {
        let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
            continue;
        };
        let holds = fds.filter_map(Result::ok).any(|fd| {
            std::fs::read_link(fd.path()).is_ok_and(|link| {
                sockets
                    .iter()
                    .any(|socket| link.as_os_str() == socket.as_str())
            })
        });
        if holds {
            return Some(true);
        }
    }
    Some(false)
}

/// The process group of `pid`, from `/proc/<pid>/stat` (the fifth field,
/// counted after the command name, which may hold spaces).
fn process_group(pid: u32) -> Option<i32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.rsplit_once(')')?
        .1
        .split_whitespace()
        .nth(2)?
        .parse()
        .ok()
}

/// The inodes of the sockets listening (state `0A`) on `port` in one
/// `/proc/net/tcp{,6}` table.
fn listening_inodes(table: &str, port: u16) -> Vec<u64> {
    table
        .lines()
        .skip(1)
        .filter_map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let (local, state, inode) = (fields.get(1)?, fields.get(3)?, fields.get(9)?);
            let (_, port_hex) = local.split_once(':')?;
            let on_port = u16::from_str_radix(port_hex, 16).ok()? == port;
            (*state == "0A" && on_port).then(|| inode.parse().ok())?
        })
        .collect()
}

/// The addresses something listens on at `port` beyond loopback (e.g.
/// `0.0.0.0`), from the kernel's socket tables: a target must listen on
/// `CHAOS_LISTEN_ADDR` only, or a chaos run would expose it to the network.
pub(crate) fn exposed_listeners(port: u16) -> Vec<String> {
    let mut exposed = Vec::new();
    for (table, loopback) in [
        ("/proc/net/tcp", &["0100007F"][..]),
        (
            "/proc/net/tcp6",
            &[
                "00000000000000000000000001000000",
                "0000000000000000FFFF00000100007F",
            ][..],
        ),
    ] {
        let Ok(text) = std::fs::read_to_string(table) else {
            continue;
        };
        exposed.extend(listeners_beyond(&text, port, loopback));
    }
    exposed
}

/// Parses one `/proc/net/tcp{,6}` table: listening sockets (state `0A`) on
/// `port` whose address is not one of `loopback` (hex, as the kernel writes it).
fn listeners_beyond(table: &str, port: u16, loopback: &[&str]) -> Vec<String> {
    table
        .lines()
        .skip(1)
        .filter_map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let (local, state) = (fields.get(1)?, fields.get(3)?);
            let (address, port_hex) = local.split_once(':')?;
            let listening = *state == "0A";
            let on_port = u16::from_str_radix(port_hex, 16).ok()? == port;
            (listening && on_port && !loopback.contains(&address)).then(|| address.to_owned())
        })
        .collect()
}

/// The agent's network while a target may be restarting: a connection waits
/// until the target is up again, as a load balancer would hold it, instead of
/// burning the agent's retries on "connection refused" from a port nobody
/// listens on for a moment. The agent's own timeout still bounds the wait.
#[derive(Debug, Clone)]
pub(crate) struct GatedNetwork {
    pub(crate) up: watch::Receiver<bool>,
}

impl Network for GatedNetwork {
    fn connect<'a>(&'a self, host_port: &'a str) -> BoxFuture<'a, io::Result<BoxStream>> {
        Box::pin(async move {
            let mut up = self.up.clone();
            up.wait_for(|up| *up)
                .await
                .map_err(|_| io::Error::new(io::ErrorKind::ConnectionRefused, "the run is over"))?;
            TcpNetwork.connect(host_port).await
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_port_is_handed_out_once_and_its_listener_is_found_in_its_group() {
        let ports: BTreeSet<u16> = (0..50).map(|_| reserve_port().unwrap()).collect();
        assert_eq!(ports.len(), 50);

        let listener = bind_loopback().unwrap();
        let port = listener.local_addr().unwrap().port();
        let ours = nix::unistd::getpgrp().as_raw();
        assert_eq!(held_by_group(port, ours), Some(true));
        // Not by a group that does not hold it, nor on a port nobody holds.
        assert_eq!(held_by_group(port, ours + 1), Some(false));
        drop(listener);
        assert_eq!(held_by_group(port, ours), Some(false));
    }

    #[test]
    fn ports_are_handed_out_below_the_ephemeral_range_where_it_leaves_room() {
        assert_eq!(below_ephemeral("32768\t60999\n"), Some(10_000..32_768));
        assert_eq!(below_ephemeral("11000 60999"), Some(10_000..11_000));
        assert_eq!(below_ephemeral("10999 60999"), None);
        assert_eq!(below_ephemeral("1024 65535"), None);
        assert_eq!(below_ephemeral(""), None);
        assert_eq!(below_ephemeral("many ports"), None);
        let Some(below) = std::fs::read_to_string(EPHEMERAL_RANGE)
            .ok()
            .and_then(|text| below_ephemeral(&text))
        else {
            return;
        };
        for _ in 0..20 {
            let port = reserve_port().unwrap();
            assert!(below.contains(&port), "{port} is not in {below:?}");
        }
    }

    /// What a CI run met: between chaos's release of a port and the
    /// target's bind, an outgoing connection was given that port as its
    /// own. The connection's socket makes the port taken, and still does
    /// once closed, for as long as it waits out TIME_WAIT: a port from the
    /// ephemeral range can be unbindable for a minute after any connection.
    #[test]
    fn a_port_a_connection_holds_is_taken_even_in_time_wait() {
        let server = bind_loopback().unwrap();
        assert!(taken(server.local_addr().unwrap().port()));
        let client = std::net::TcpStream::connect(server.local_addr().unwrap()).unwrap();
        let (accepted, _) = server.accept().unwrap();
        let port = client.local_addr().unwrap().port();
        assert!(taken(port), "a connected socket holds {port}");
        // The client closes first, so its side waits out TIME_WAIT.
        drop(client);
        let mut rest = Vec::new();
        let _ = std::io::Read::read_to_end(&mut &accepted, &mut rest);
        drop(accepted);
        assert!(taken(port), "{port} waits out TIME_WAIT");
    }

    #[test]
    fn the_harness_listens_on_loopback_only() {
        let listener = bind_loopback().unwrap();
        let addr = listener.local_addr().unwrap();
        assert!(addr.ip().is_loopback(), "{addr}");
        assert_eq!(exposed_listeners(addr.port()), Vec::<String>::new());
        assert!(reserve_port().unwrap() > 0);
    }

    #[test]
    fn a_wildcard_listener_is_found_and_loopback_is_not() {
        let table = "  sl  local_address rem_address   st tx_queue rx_queue\n\
   0: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000\n\
   1: 00000000:1F91 00000000:0000 0A 00000000:00000000 00:00000000 00000000\n\
   2: 00000000:1F90 0100007F:A2B4 01 00000000:00000000 00:00000000 00000000\n";
        assert_eq!(
            listeners_beyond(table, 0x1F90, &["0100007F"]),
            Vec::<String>::new()
        );
        assert_eq!(
            listeners_beyond(table, 0x1F91, &["0100007F"]),
            vec!["00000000"]
        );
    }
}
