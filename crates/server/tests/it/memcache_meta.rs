//! memcached's meta protocol (mg, ms, md, ma, mn, me) on the memcached port: return flags in
//! the order asked, quiet mode, opaque tokens, base64 keys, modes, CAS and vivify, as
//! memcached 1.6.18 answers them (each expectation was checked against it by hand).

use crate::common;
use crate::memcache_client::Mc;

/// The CAS `mg <key> c` returns.
fn cas_of(c: &mut Mc, key: &str) -> u64 {
    let line = c.cmd(&format!("mg {key} c\r\n"));
    let token = line
        .strip_prefix("HD c")
        .unwrap_or_else(|| panic!("mg {key} c: {line}"));
    token.parse().unwrap()
}

/// The seconds `mg <key> t` says are left.
fn ttl_of(c: &mut Mc, key: &str) -> i64 {
    let line = c.cmd(&format!("mg {key} t\r\n"));
    let token = line
        .strip_prefix("HD t")
        .unwrap_or_else(|| panic!("mg {key} t: {line}"));
    token.parse().unwrap()
}

#[test]
fn mg_returns_the_flags_asked_in_their_order() {
    let srv = common::start(2);
    let mut c = Mc::connect(&srv);
    c.expect("ms mk 2 F5 T0\r\nhi\r\n", &["HD"]);
    let cas = cas_of(&mut c, "mk");
    c.expect(
        "mg mk v f c k s t O99 h l q\r\n",
        &[&format!("VA 2 f5 c{cas} kmk s2 t-1 O99 h0 l0"), "hi"],
    );
    c.expect("mg mk\r\n", &["HD"]);
    c.expect("mg missing v\r\n", &["EN"]);
    c.expect("mg missing v k O5\r\n", &["EN kmissing O5"]);
    // Quiet: a miss says nothing; mn shows every reply before it was sent.
    c.expect("mg missing v q\r\nmg missing q k O1\r\nmn\r\n", &["MN"]);
    srv.stop();
}

#[test]
fn mg_flags_t_and_cap_t_read_and_touch_the_deadline() {
    let srv = common::start(1);
    let mut c = Mc::connect(&srv);
    c.expect("ms k 1 T0\r\nx\r\n", &["HD"]);
    // As memcached: `t` shows the TTL from before the `T`.
    c.expect("mg k t T100\r\n", &["HD t-1"]);
    assert!((98..=100).contains(&ttl_of(&mut c, "k")));
    c.expect("mg k T500\r\n", &["HD"]);
    assert!((498..=500).contains(&ttl_of(&mut c, "k")));
    c.expect("mg k T-1\r\nmg k v\r\n", &["HD", "EN"]);
    srv.stop();
}

#[test]
fn ms_modes_cas_and_quiet_mode() {
    let srv = common::start(2);
    let mut c = Mc::connect(&srv);
    c.expect("ms m1 2 T0 F3 k O7\r\nhi\r\n", &["HD km1 O7"]);
    let cas = cas_of(&mut c, "m1");
    c.expect("ms m1 2 MA k O8\r\n!!\r\n", &["HD km1 O8"]);
    c.expect("ms m9 2 MR k O9 c\r\nhi\r\n", &["NS km9 O9 c0"]);
    c.expect("ms m9 2 MA\r\nhi\r\n", &["NS"]);
    c.expect("ms m9 2 MP\r\nhi\r\n", &["NS"]);
    c.expect("ms m1 2 ME\r\nhi\r\n", &["NS"]);
    c.expect("mg m1 s v f t k\r\n", &["VA 4 s4 f3 t-1 km1", "hi!!"]);
    // The append changed the CAS.
    c.expect(&format!("ms m1 2 C{cas} k O10\r\nxx\r\n"), &["EX km1 O10"]);
    let cas = cas_of(&mut c, "m1");
    c.expect(&format!("ms m1 2 C{cas} c\r\nxx\r\n"), &[]);
    let line = c.line();
    assert!(
        line.starts_with("HD c") && line != format!("HD c{cas}"),
        "{line}"
    );
    c.expect(
        "ms m2 1 MS q\r\nx\r\nms m2 1 ME q\r\ny\r\nmn\r\n",
        &["NS", "MN"],
    );
    c.expect("ms nope 1 C5\r\nx\r\n", &["NF"]);
    c.expect(
        "ms mx 2 MX\r\nhi\r\n",
        &["CLIENT_ERROR invalid mode for ms M token"],
    );
    c.sync();
    // E: the CAS to give the item.
    c.expect("ms e1 1 E777 c\r\nx\r\n", &["HD c777"]);
    c.expect("mg e1 c\r\n", &["HD c777"]);
    srv.stop();
}

#[test]
fn md_and_ma() {
    let srv = common::start(2);
    let mut c = Mc::connect(&srv);
    c.expect("md nope k O11 q\r\n", &["NF knope O11"]);
    c.expect("ms d 1\r\nx\r\nmd d q\r\nmd d\r\n", &["HD", "NF"]);
    c.expect("ms d 1\r\nx\r\nmd d C1\r\n", &["HD", "EX"]);
    let cas = cas_of(&mut c, "d");
    c.expect(&format!("md d C{cas}\r\n"), &["HD"]);
    c.expect("ma c1\r\n", &["NF"]);
    c.expect("ma c1 q\r\n", &["NF"]);
    c.expect("ma c1 N0 J10 k O12 v t\r\n", &["VA 2 kc1 O12 t-1", "10"]);
    c.expect("ma c1 MD D3 v k\r\n", &["VA 1 kc1", "7"]);
    c.expect("ma c1 q\r\nma c1 v\r\n", &["VA 1", "9"]);
    c.expect("ma c1\r\n", &["HD"]);
    c.expect(
        "ms c1 1 q\r\nz\r\nma c1\r\n",
        &["CLIENT_ERROR cannot increment or decrement non-numeric value"],
    );
    c.expect("ma c2 N0 J5 t v\r\n", &["VA 1 t-1", "5"]);
    srv.stop();
}

#[test]
fn base64_keys_opaque_noop_and_debug() {
    let srv = common::start(1);
    let mut c = Mc::connect(&srv);
    // "mk" is bWs= in base64: the same item as the plain key.
    c.expect("ms bWs= 2 b k O1\r\nhi\r\n", &["HD kbWs= b O1"]);
    c.expect("mg mk v\r\n", &["VA 2", "hi"]);
    c.expect("mg bWs= b k v\r\n", &["VA 2 kbWs= b", "hi"]);
    c.expect("ms !! 2 b\r\nhi\r\n", &["CLIENT_ERROR error decoding key"]);
    c.expect("mn\r\n", &["MN"]);
    c.expect("me nope\r\n", &["EN"]);
    let line = c.cmd("me mk\r\n");
    assert!(line.starts_with("ME mk exp=-1 la=0 cas="), "{line}");
    assert!(line.ends_with(" size=2"), "{line}");
    srv.stop();
}

#[test]
fn mg_n_vivifies_a_missing_item_for_the_first_client() {
    let srv = common::start(1);
    let mut c = Mc::connect(&srv);
    let line = c.cmd("mg viv N1000 v\r\n");
    assert_eq!(line, "VA 0 W");
    assert_eq!(c.block(0), b"");
    // The second client finds the empty item (memcached would add Z: see docs/memcache.md).
    c.expect("mg viv N30 v\r\n", &["VA 0", ""]);
    c.expect("ms viv 1 T0\r\nx\r\nmg viv v\r\n", &["HD", "VA 1", "x"]);
    srv.stop();
}

/// Session 14's fixes of issue 21's known differences (each line as memcached 1.6.18 answered
/// the same commands, checked by hand): `t` shows the TTL as of its place among the flags,
/// `ma T` sets the TTL, `ma q` still answers an item `N` created, `ms` mode `E` ignores `C`
/// and mode `R` with `C` is a cas (NF on a missing item), and a refused `ms c` says `c0`.
#[test]
fn flag_order_ma_t_and_q_and_ms_modes_with_c_as_memcached() {
    let srv = common::start(2);
    let mut c = Mc::connect(&srv);
    c.expect("ms k 1 T0\r\nx\r\n", &["HD"]);
    // `t` after `T`: the new TTL; before it: the old one.
    c.expect("mg k T200 t\r\n", &["HD t200"]);
    c.expect("mg k t T0\r\n", &["HD t200"]);
    c.expect("mg k t\r\n", &["HD t-1"]);
    // ma q: an item N created is answered, a plain hit is not.
    c.expect("ma n q N0\r\n", &["HD"]);
    c.expect("ma n q\r\nmn\r\n", &["MN"]);
    // ma T sets the TTL of an existing item; `t` by flag order.
    c.expect("ma n T300 t v\r\n", &["VA 1 t300", "2"]);
    c.expect("mg n t\r\n", &["HD t300"]);
    c.expect("ma n t T0\r\n", &["HD t300"]);
    c.expect("mg n t\r\n", &["HD t-1"]);
    // A created item: no TTL before `N`, then the later of `N` and `T`.
    c.expect("ma n2 t N300 q v J5\r\n", &["VA 1 t-1", "5"]);
    c.expect("mg n2 t\r\n", &["HD t300"]);
    c.expect("ma n3 N300 T400 t\r\n", &["HD t400"]);
    c.expect("mg n3 t\r\n", &["HD t400"]);
    // ms modes with C.
    c.expect("ms a 1 ME C5\r\nx\r\n", &["HD"]);
    c.expect("ms a 1 ME C5\r\nx\r\n", &["NS"]);
    c.expect("ms b 1 MR C5\r\nx\r\n", &["NF"]);
    c.expect("ms b 1 c MR\r\nx\r\n", &["NS c0"]);
    c.expect("ms b 1 MA C5\r\nx\r\n", &["NS"]);
    let cas = cas_of(&mut c, "a");
    c.expect(&format!("ms a 1 MR C{}\r\ny\r\n", cas + 1), &["EX"]);
    c.expect(&format!("ms a 1 MR C{cas}\r\ny\r\n"), &["HD"]);
    c.expect("mg a v\r\n", &["VA 1", "y"]);
    srv.stop();
}
