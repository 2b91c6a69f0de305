//! The native protocol's test vectors (`tests/vectors/native.txt`, explained in
//! `docs/protocol.md`): every request and response decodes to what the vector says and
//! re-encodes byte-for-byte; every malformed frame fails with the stated code and gets the
//! stated ERROR frame.
//!
//! The vectors were built by an independent implementation of the layout, so this checks the
//! codec against the document, not against itself. The server and client tests read the same
//! file; the parser below is all they need.

use directkv_proto::native::{
    decode_request, decode_request_datagram, decode_response, encode_request, encode_request_frame,
    encode_response, encode_response_frame, shard_of_hash, NativeLimits, NativeOp, Request,
    RequestFrame, Response, ResponseFrame, ResponseOp,
};

use directkv_testkit::vectors::{hex, records, unhex};

const VECTORS: &str = include_str!(concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/vectors/native.txt"
));

/// One record of the vector file.
#[derive(Default, Debug)]
struct Vector {
    name: String,
    request: Vec<u8>,
    response: Vec<u8>,
    /// Decoded-form lines after `request:` ("op: ...", "hello: ...", ...).
    request_lines: Vec<String>,
    /// Decoded-form lines after `response:` ("result: ...", "error: ...", ...).
    response_lines: Vec<String>,
    expect: String,
    /// Shard-rule records: key, its xxh3-64 hash, shard counts and the expected shards.
    key: Vec<u8>,
    hash: Option<u64>,
    shard_counts: Vec<u16>,
    shards: Vec<u16>,
}

fn numbers(s: &str) -> Vec<u16> {
    s.split_whitespace().map(|n| n.parse().unwrap()).collect()
}

fn parse_vectors(text: &str) -> Vec<Vector> {
    records(text)
        .into_iter()
        .map(|record| {
            let mut v = Vector::default();
            let mut after_response = false;
            for f in record.fields {
                let value = f.value.as_str();
                match f.key.as_str() {
                    "name" => {
                        v.name = value.to_string();
                        after_response = false;
                    }
                    "note" => {}
                    "request" => v.request = unhex(value),
                    "response" => {
                        v.response = unhex(value);
                        after_response = true;
                    }
                    "expect" => v.expect = value.to_string(),
                    "key" => v.key = unhex(value),
                    "hash" => v.hash = Some(u64::from_str_radix(value, 16).unwrap()),
                    "shard_count" => v.shard_counts = numbers(value),
                    "shard" => v.shards = numbers(value),
                    _ if after_response => v.response_lines.push(f.line),
                    _ => v.request_lines.push(f.line),
                }
            }
            v
        })
        .collect()
}

fn render_op(op: &NativeOp<'_>) -> String {
    format!(
        "op: {} flags={:02x} func={} elem={} key={} arg={} arg2={}",
        short_name(op),
        op.flags.bits(),
        op.func,
        op.elem,
        hex(op.key),
        hex(op.arg),
        hex(op.arg2)
    )
}

/// The vector file's op names: the engine's, with "update_scalar2scalar" shortened to
/// "update_s2s" and so on.
fn short_name(op: &NativeOp<'_>) -> String {
    op.kind
        .name()
        .replace("scalar2scalar", "s2s")
        .replace("scalar2vector", "s2v")
        .replace("vector2vector", "v2v")
}

fn render_request(f: &RequestFrame<'_>) -> Vec<String> {
    match &f.body {
        Request::Ops(batch) => batch.iter().map(|op| render_op(&op)).collect(),
        Request::Hello(h) => vec![format!(
            "hello: password={} name={}",
            hex(h.password),
            hex(h.client_name)
        )],
        Request::Ping(p) => vec![format!("ping: payload={}", hex(p))],
        Request::Attach(s) => vec![format!("attach: shard={s}")],
    }
}

fn render_response(f: &ResponseFrame<'_>) -> Vec<String> {
    match &f.body {
        Response::Ops(batch) => batch
            .iter()
            .map(|r| format!("result: status={:02x} data={}", r.status, hex(r.data)))
            .collect(),
        Response::Hello(r) => {
            let ports: Vec<String> = r.shard_map.ports.iter().map(u16::to_string).collect();
            vec![format!(
                "hello_reply: frame_len_max={} value_len_max={} frame_ops_max={} key_len_max={} \
                 hash={} ports={} name={}",
                r.limits.frame_len_max,
                r.limits.value_len_max,
                r.limits.frame_ops_max,
                r.limits.key_len_max,
                r.shard_map.hash,
                ports.join(","),
                hex(r.server_name.as_bytes())
            )]
        }
        Response::Pong(p) => vec![format!("pong: payload={}", hex(p))],
        Response::Attach(s) => vec![format!("attach_reply: shard={s}")],
        Response::Error(e) => vec![format!(
            "error: code={} closing={} op_index={} message={}",
            e.code,
            u8::from(e.closing),
            e.op_index.map_or("-".to_string(), |i| i.to_string()),
            hex(e.message.as_bytes())
        )],
    }
}

/// Limits for a vector: the defaults, with overrides from `expect: ok name=value`.
fn limits_for(v: &Vector) -> NativeLimits {
    let mut limits = NativeLimits::DEFAULT;
    for opt in v.expect.split_whitespace().skip(1) {
        match opt.split_once('=') {
            Some(("frame_len_max", n)) => limits.frame_len_max = n.parse().unwrap(),
            _ => panic!("{}: unknown expect option {opt}", v.name),
        }
    }
    limits
}

/// Every frame of `buf`, decoded, with its bytes.
fn response_frames<'a>(
    v: &Vector,
    mut buf: &'a [u8],
    limits: &NativeLimits,
) -> Vec<(ResponseFrame<'a>, &'a [u8])> {
    let mut frames = Vec::new();
    while !buf.is_empty() {
        let (f, n) = decode_response(buf, limits)
            .unwrap_or_else(|e| panic!("{}: response: {e}", v.name))
            .unwrap_or_else(|| panic!("{}: response incomplete", v.name));
        frames.push((f, &buf[..n]));
        buf = &buf[n..];
    }
    frames
}

fn check_ok(v: &Vector) {
    let limits = limits_for(v);
    let (req, n) = decode_request(&v.request, &limits)
        .unwrap_or_else(|e| panic!("{}: {e}", v.name))
        .unwrap_or_else(|| panic!("{}: incomplete", v.name));
    assert_eq!(n, v.request.len(), "{}: frame length", v.name);
    assert_eq!(
        render_request(&req),
        v.request_lines,
        "{}: decoded request",
        v.name
    );
    for cut in 0..v.request.len() {
        assert!(
            matches!(decode_request(&v.request[..cut], &limits), Ok(None)),
            "{}: prefix of {cut} bytes is not incomplete",
            v.name
        );
    }
    assert!(
        decode_request_datagram(&v.request, &limits).is_ok(),
        "{}",
        v.name
    );

    let mut again = Vec::new();
    encode_request_frame(&req, &limits, &mut again).unwrap();
    assert_eq!(
        hex(&again),
        hex(&v.request),
        "{}: re-encoded request",
        v.name
    );

    let frames = response_frames(v, &v.response, &limits);
    let lines: Vec<String> = frames
        .iter()
        .flat_map(|(f, _)| render_response(f))
        .collect();
    assert_eq!(lines, v.response_lines, "{}: decoded response", v.name);
    for (f, bytes) in &frames {
        assert_eq!(
            f.request_id, req.request_id,
            "{}: response request id",
            v.name
        );
        let mut again = Vec::new();
        encode_response_frame(f, &limits, &mut again).unwrap();
        assert_eq!(hex(&again), hex(bytes), "{}: re-encoded response", v.name);
    }

    // The client's and the server's paths: plain ops in, the same bytes out.
    if let Request::Ops(batch) = &req.body {
        let ops: Vec<NativeOp<'_>> = batch.iter().map(NativeOp::without_copy_flags).collect();
        let mut client = Vec::new();
        encode_request(req.request_id, &ops, &limits, &mut client).unwrap();
        assert_eq!(hex(&client), hex(&v.request), "{}: client encoding", v.name);

        let results: Vec<ResponseOp<'_>> = frames
            .iter()
            .flat_map(|(f, _)| match &f.body {
                Response::Ops(b) => b.iter().collect::<Vec<_>>(),
                other => panic!("{}: response is {other:?}", v.name),
            })
            .collect();
        assert_eq!(results.len(), ops.len(), "{}: one result per op", v.name);
        let mut server = Vec::new();
        encode_response(req.request_id, &results, &limits, &mut server).unwrap();
        assert_eq!(
            hex(&server),
            hex(&v.response),
            "{}: server encoding",
            v.name
        );
    }
}

fn check_error(v: &Vector, fatal: bool, code: u8) {
    let limits = limits_for(&Vector {
        expect: String::new(),
        ..Default::default()
    });
    let e = match decode_request(&v.request, &limits) {
        Err(e) => e,
        Ok(r) => panic!("{}: decoded {r:?}", v.name),
    };
    assert_eq!(e.code.code(), code, "{}: error code", v.name);
    assert_eq!(
        e.is_resynchronisable(),
        !fatal,
        "{}: resynchronisable",
        v.name
    );
    if !fatal {
        assert_eq!(e.skip, Some(v.request.len()), "{}: skip", v.name);
    }
    let reply = ResponseFrame {
        request_id: e.request_id,
        body: Response::Error(e.reply()),
    };
    let mut out = Vec::new();
    encode_response_frame(&reply, &limits, &mut out).unwrap();
    assert_eq!(hex(&out), hex(&v.response), "{}: ERROR frame", v.name);
    let frames = response_frames(v, &v.response, &limits);
    let lines: Vec<String> = frames
        .iter()
        .flat_map(|(f, _)| render_response(f))
        .collect();
    assert_eq!(lines, v.response_lines, "{}: decoded ERROR frame", v.name);
}

/// The shard rule on a known hash (the hash itself is checked by crates that link xxh3).
fn check_shards(v: &Vector, hash: u64) {
    assert!(!v.key.is_empty(), "{}", v.name);
    assert_eq!(v.shard_counts.len(), v.shards.len(), "{}", v.name);
    for (&count, &want) in v.shard_counts.iter().zip(&v.shards) {
        assert_eq!(
            shard_of_hash(hash, count),
            want,
            "{}: {count} shards",
            v.name
        );
    }
}

#[test]
fn every_vector_decodes_and_re_encodes_byte_for_byte() {
    let vectors = parse_vectors(VECTORS);
    let (mut ok, mut bad, mut shard) = (0, 0, 0);
    for v in &vectors {
        if let Some(hash) = v.hash {
            check_shards(v, hash);
            shard += 1;
            continue;
        }
        assert!(!v.name.is_empty() && !v.request.is_empty() && !v.response.is_empty());
        let mut words = v.expect.split_whitespace();
        match words.next() {
            Some("ok") => {
                check_ok(v);
                ok += 1;
            }
            Some(kind @ ("fatal" | "resync")) => {
                let code = words.next().unwrap().parse().unwrap();
                check_error(v, kind == "fatal", code);
                bad += 1;
            }
            other => panic!("{}: bad expect {other:?}", v.name),
        }
    }
    assert!(
        ok >= 12 && bad >= 4 && shard >= 1,
        "{ok} valid, {bad} malformed, {shard} shard"
    );
}

#[test]
fn vector_names_are_unique() {
    let vectors = parse_vectors(VECTORS);
    let mut names: Vec<&str> = vectors.iter().map(|v| v.name.as_str()).collect();
    names.sort_unstable();
    let n = names.len();
    names.dedup();
    assert_eq!(names.len(), n);
}

/// docs/protocol.md shows the vectors to readers: every record of the file is there, under its
/// name, with the same bytes (a block that abbreviates a long field with "..." is checked up to
/// it), so the document cannot drift from what the codec is tested against.
#[test]
fn the_document_shows_every_vector_with_its_bytes() {
    const DOC: &str = include_str!("../../../../docs/protocol.md");
    let vectors = parse_vectors(VECTORS);
    let native = &DOC[DOC.find("\n## Native\n").unwrap()..DOC.find("\n## RESP\n").unwrap()];
    let mut shown = 0;
    for v in vectors.iter().filter(|v| v.hash.is_none()) {
        let head = format!("**{}** - ", v.name);
        let at = native
            .find(&head)
            .unwrap_or_else(|| panic!("docs/protocol.md does not show vector {}", v.name));
        let block = &native[at..];
        let block = &block[..block.find("```\n\n").unwrap_or(block.len())];
        for (field, bytes) in [("request", &v.request), ("response", &v.response)] {
            let doc_hex = doc_field(block, field);
            let want = hex(bytes);
            match doc_hex.split_once("...") {
                Some((before, _)) => assert!(
                    want.starts_with(before.trim_end_matches(|c: char| !c.is_ascii_hexdigit())),
                    "{}: {field} in the document",
                    v.name
                ),
                None => assert_eq!(doc_hex, want, "{}: {field} in the document", v.name),
            }
        }
        shown += 1;
    }
    assert!(shown >= 40, "{shown} vectors checked");
}

/// The hex of a field of a document block: its line and the indented lines after it (a split
/// response), spaces dropped, up to a parenthesised remark.
fn doc_field(block: &str, field: &str) -> String {
    let mut out = String::new();
    let mut inside = false;
    for line in block.lines() {
        if let Some(rest) = line.strip_prefix(field) {
            inside = true;
            out.push_str(rest);
        } else if inside && line.starts_with("          ") {
            out.push_str(line);
        } else if inside {
            break;
        }
    }
    let out = out.split('(').next().unwrap_or("");
    out.chars().filter(|c| !c.is_whitespace()).collect()
}
