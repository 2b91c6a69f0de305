//! `requirepass` on the memcached port: memcached 1.6's ASCII login (`-Y`): a `set` whose
//! data is `<user> <password>`, user `default`; every reply as memcached 1.6.18 gives it.

use crate::common;
use crate::memcache_client::Mc;
use directkv_server::{Server, ServerConfig};

fn server() -> Server {
    common::start_with(ServerConfig {
        requirepass: Some("s3cret".into()),
        ..common::config(2)
    })
}

#[test]
fn nothing_but_the_login_is_served_before_it() {
    let srv = server();
    let mut c = Mc::connect(&srv);
    c.expect("get a\r\n", &["CLIENT_ERROR unauthenticated"]);
    c.expect("version\r\n", &["CLIENT_ERROR unauthenticated"]);
    c.expect("bogus\r\n", &["CLIENT_ERROR unauthenticated"]);
    c.expect(
        "add a 0 0 13\r\ndefault s3cret\r\n",
        &["CLIENT_ERROR unauthenticated"],
    );
    // The rest of what was read with a refused request is dropped, as memcached does: the
    // version after the get is not answered.
    c.expect("get a\r\nversion\r\n", &["CLIENT_ERROR unauthenticated"]);
    c.expect(
        "set x 0 0 14\r\ndefault s3cret\r\nmn\r\n",
        &["STORED", "MN"],
    );
    c.expect(
        "set a 0 0 1\r\nx\r\nget a\r\n",
        &["STORED", "VALUE a 0 1", "x", "END"],
    );
    srv.stop();
}

#[test]
fn wrong_logins_are_refused_and_the_connection_may_try_again() {
    let srv = server();
    let mut c = Mc::connect(&srv);
    c.expect(
        "set x 0 0 13\r\ndefault wrong\r\n",
        &["CLIENT_ERROR authentication failure"],
    );
    c.expect(
        "set x 0 0 12\r\nadmin s3cret\r\n",
        &["CLIENT_ERROR authentication failure"],
    );
    c.expect(
        "set x 0 0 5\r\nabcde\r\n",
        &["CLIENT_ERROR bad authentication token format"],
    );
    c.expect("get a\r\n", &["CLIENT_ERROR unauthenticated"]);
    // noreply does not silence the login's STORED (memcached neither).
    c.expect("set x 0 0 14 noreply\r\ndefault s3cret\r\n", &["STORED"]);
    c.expect("version\r\n", &["VERSION 1.6.18"]);
    assert_eq!(c.stat("auth_cmds"), "4");
    assert_eq!(c.stat("auth_errors"), "3");
    // The login is not a write: no key `x`.
    c.expect("get x\r\n", &["END"]);
    // A RESP connection still needs its AUTH.
    let mut r = common::Client::connect(&srv);
    match r.cmd(&["GET", "a"]) {
        directkv_proto::resp::Reply::Error(e) => assert!(e.starts_with("NOAUTH"), "{e}"),
        other => panic!("{other:?}"),
    }
    srv.stop();
}
