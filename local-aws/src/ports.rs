//! Loopback ports for the stand-ins, handed out so that two servers of one process never meet on
//! one port.
//!
//! The OS hands a freed port out again as soon as nothing is bound to it. moto is a separate
//! process that binds the port it is given only a second or two after it starts; in that gap a
//! stand-in of this process (the AWS proxy, a Runtime API) binding port 0 could get the same port.
//! The proxy answers moto's control API on behalf of ANOTHER test's moto, so the new moto would be
//! reported ready, fail to bind and exit, and the test would later meet "connection refused" once
//! the other test's proxy stopped. So every port given to moto is reserved here until that server
//! stops, every stand-in binds through [`bind_loopback`], which skips reserved ports, and moto is
//! ready only once its own process holds the listening socket ([`held_by`]).

use std::{
    collections::BTreeSet,
    net::{Ipv4Addr, TcpListener as StdListener},
    sync::Mutex,
};

use anyhow::Result;
use tokio::net::TcpListener;

/// Ports given to a moto server of this process that has not stopped.
static RESERVED: Mutex<BTreeSet<u16>> = Mutex::new(BTreeSet::new());

/// A loopback port reserved for a child process until dropped.
pub struct Reserved(pub u16);

impl Drop for Reserved {
    fn drop(&mut self) {
        RESERVED.lock().unwrap().remove(&self.0);
    }
}

/// A loopback port nothing is bound to and no other server of this process was given.
pub fn reserve() -> Result<Reserved> {
    loop {
        let port = StdListener::bind((Ipv4Addr::LOCALHOST, 0))?
            .local_addr()?
            .port();
        if RESERVED.lock().unwrap().insert(port) {
            return Ok(Reserved(port));
        }
    }
}

/// A listener on a free loopback port that is not reserved for a child process. A reserved port
/// the OS offers is held until a good one is found, so it is not offered again meanwhile.
pub async fn bind_loopback() -> Result<TcpListener> {
    let mut skipped = Vec::new();
    loop {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).await?;
        let port = listener.local_addr()?.port();
        if !is_reserved(port) {
            return Ok(listener);
        }
        skipped.push(listener);
    }
}

fn is_reserved(port: u16) -> bool {
    RESERVED.lock().unwrap().contains(&port)
}

/// Whether process `pid` holds the socket listening on 127.0.0.1:`port` (read from Linux's
/// /proc; where there is no /proc, assumed so).
pub fn held_by(pid: u32, port: u16) -> bool {
    let Ok(table) = std::fs::read_to_string("/proc/net/tcp") else {
        return true;
    };
    let Some(inode) = listening_inode(&table, port) else {
        return false;
    };
    let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
        return false;
    };
    let socket = format!("socket:[{inode}]");
    fds.flatten().any(|fd| {
        std::fs::read_link(fd.path()).is_ok_and(|target| target.as_os_str() == socket.as_str())
    })
}

/// The inode of the socket listening on 127.0.0.1:`port` in a `/proc/net/tcp` table.
fn listening_inode(table: &str, port: u16) -> Option<String> {
    // Columns: sl local_address rem_address st tx_queue:rx_queue tr:tm->when retrnsmt uid timeout
    // inode; addresses are hex, 127.0.0.1 little-endian as 0100007F; state 0A is LISTEN.
    let local = format!("0100007F:{port:04X}");
    table.lines().skip(1).find_map(|line| {
        let fields: Vec<&str> = line.split_whitespace().collect();
        (fields.get(1) == Some(&local.as_str()) && fields.get(3) == Some(&"0A"))
            .then(|| fields.get(9).map(|s| (*s).to_owned()))
            .flatten()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_stand_in_never_binds_a_port_reserved_for_moto() {
        // A fifth of the ephemeral range, so that a stand-in ignoring the reservations would
        // meet one of them many times over in 200 binds.
        let reserved: Vec<Reserved> = (0..5000).map(|_| reserve().unwrap()).collect();
        for _ in 0..200 {
            let port = bind_loopback().await.unwrap().local_addr().unwrap().port();
            assert!(
                reserved.iter().all(|r| r.0 != port),
                "bound reserved {port}"
            );
        }
    }

    #[test]
    fn a_listening_socket_is_found_held_by_this_process_and_not_by_another() {
        let listener = StdListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
        let port = listener.local_addr().unwrap().port();
        assert!(held_by(std::process::id(), port));
        assert!(!held_by(1, port));
        drop(listener);
        assert!(!held_by(std::process::id(), port));
    }

    #[test]
    fn only_a_listening_socket_on_loopback_counts() {
        let table = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n\
   0: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000  0 0 111 1\n\
   1: 0100007F:1F91 0100007F:1F90 01 00000000:00000000 00:00000000 00000000  0 0 222 1\n\
   2: 00000000:1F92 00000000:0000 0A 00000000:00000000 00:00000000 00000000  0 0 333 1\n";
        assert_eq!(listening_inode(table, 8080).as_deref(), Some("111"));
        assert_eq!(listening_inode(table, 8081), None);
        assert_eq!(listening_inode(table, 8082), None);
    }
}
