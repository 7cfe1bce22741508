//! CONFIG SET port and bind at run time, against real Redis side by side: the server listens on
//! the new port (and no longer on the old one), a port in use or an address that cannot be bound
//! is refused with Redis's error while the old listeners stay, and an empty bind list stops new
//! TCP connections until bind is set again. Ports are masked.

mod common;

use std::net::TcpStream;

use common::{show, Client, RedisServer, Server, TestServer};

fn connects(port: u16) -> bool {
    TcpStream::connect(("127.0.0.1", port)).is_ok()
}

fn rebind_scenario(server: &Server) -> Vec<String> {
    let mut out = Vec::new();
    let mut c = server.client();
    let new_port = common::free_port();
    out.push(show(&c.cmd(&["CONFIG", "SET", "port", &new_port.to_string()])));
    out.push(format!("old port connects: {}", connects(server.port)));
    let mut moved = Client::connect(new_port);
    out.push(show(&moved.cmd(&["PING"])));
    out.push(show(&moved.cmd(&["CONFIG", "GET", "port"])).replace(&new_port.to_string(), "NEW"));

    // A port another socket holds: refused, and the server stays where it was.
    let holder = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let taken = holder.local_addr().unwrap().port().to_string();
    out.push(show(&moved.cmd(&["CONFIG", "SET", "port", &taken])));
    out.push(format!("new port still connects: {}", connects(new_port)));
    out.push(show(&moved.cmd(&["CONFIG", "GET", "port"])).replace(&new_port.to_string(), "NEW"));

    out.push(show(&moved.cmd(&["CONFIG", "SET", "bind", "999.999.999.999"])));
    out.push(show(&moved.cmd(&["CONFIG", "GET", "bind"])));
    out.push(show(&moved.cmd(&["CONFIG", "SET", "bind", ""])));
    out.push(format!("connects with no bind address: {}", connects(new_port)));
    out.push(show(&moved.cmd(&["PING"])));
    out.push(show(&moved.cmd(&["CONFIG", "SET", "bind", "127.0.0.1", "port", &server.port.to_string()])));
    out.push(format!("back on the first port: {} {}", connects(server.port), connects(new_port)));
    out
}

#[test]
fn config_set_port_and_bind_rebind_like_redis() {
    let expected = rebind_scenario(&RedisServer::new());
    let got = rebind_scenario(&TestServer::new());
    assert_eq!(got, expected);
}
