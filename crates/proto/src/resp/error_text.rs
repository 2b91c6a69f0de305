//! Redis' standard error replies, word for word, for `RespWriter::error`.
//!
//! Clients match on these texts (redis-py maps `WRONGTYPE`, `NOAUTH`, "unknown command" and
//! others to exception classes; test suites compare whole strings), so they are kept in one
//! place and tested as literals. Fixed texts are `&'static str`; texts that echo the request
//! are built as `String`, which is fine on an error path.

use super::error::ProtocolError;

/// Budget of Redis' unknown-command text: the name is cut to this many bytes, and arguments are
/// echoed while the argument part is shorter than this.
pub const UNKNOWN_COMMAND_TEXT_MAX: usize = 128;

/// `ERR wrong number of arguments for 'get' command`, the name lowercased as Redis 7 prints it.
pub fn err_wrong_arity(command: &str) -> String {
    format!(
        "ERR wrong number of arguments for '{}' command",
        command.to_ascii_lowercase()
    )
}

pub const fn err_not_integer() -> &'static str {
    "ERR value is not an integer or out of range"
}

pub const fn err_not_float() -> &'static str {
    "ERR value is not a valid float"
}

pub const fn err_syntax() -> &'static str {
    "ERR syntax error"
}

pub const fn err_overflow() -> &'static str {
    "ERR increment or decrement would overflow"
}

/// DECRBY of -9223372036854775808, whose negation does not fit an i64 (Redis 7 checks this
/// before it reads the key).
pub const fn err_decrement_overflow() -> &'static str {
    "ERR decrement would overflow"
}

/// INCRBYFLOAT whose result is not finite.
pub const fn err_nan_or_infinity() -> &'static str {
    "ERR increment would produce NaN or Infinity"
}

pub const fn err_wrong_type() -> &'static str {
    "WRONGTYPE Operation against a key holding the wrong kind of value"
}

/// A command other than AUTH/HELLO/QUIT before authentication.
pub const fn err_noauth() -> &'static str {
    "NOAUTH Authentication required."
}

/// AUTH or HELLO ... AUTH with a wrong password.
pub const fn err_wrongpass() -> &'static str {
    "WRONGPASS invalid username-password pair or user is disabled."
}

/// HELLO with a protocol version other than 2 or 3.
pub const fn err_noproto() -> &'static str {
    "NOPROTO unsupported protocol version"
}

/// SELECT of a database other than 0.
pub const fn err_db_index() -> &'static str {
    "ERR DB index is out of range"
}

/// The reply to a request that is not RESP, sent just before closing the connection: Redis
/// prefixes the protocol error text with the `ERR` code.
pub fn err_protocol(error: &ProtocolError) -> String {
    format!("ERR {error}")
}

/// Redis 7's reply to an unknown command, e.g.
/// `ERR unknown command 'foo', with args beginning with: 'a' 'b' ` (the list is empty but the
/// clause still printed when there are no arguments).
///
/// The name is cut to `UNKNOWN_COMMAND_TEXT_MAX` bytes. Each argument is written as `'arg' `,
/// cut to the budget left, while the argument part is shorter than the budget; the quotes and
/// spaces count against it. Cuts are by byte and every byte is echoed raw, as in Redis (so the
/// text is bytes, not a `String`: write it with `RespWriter::error_bytes`, which turns CR and LF
/// into spaces).
pub fn err_unknown_command<'a>(name: &[u8], args: impl IntoIterator<Item = &'a [u8]>) -> Vec<u8> {
    let name = &name[..name.len().min(UNKNOWN_COMMAND_TEXT_MAX)];
    let mut listed: Vec<u8> = Vec::new();
    for arg in args {
        if listed.len() >= UNKNOWN_COMMAND_TEXT_MAX {
            break;
        }
        let budget = UNKNOWN_COMMAND_TEXT_MAX - listed.len();
        listed.push(b'\'');
        listed.extend_from_slice(&arg[..arg.len().min(budget)]);
        listed.extend_from_slice(b"' ");
    }
    let mut text = b"ERR unknown command '".to_vec();
    text.extend_from_slice(name);
    text.extend_from_slice(b"', with args beginning with: ");
    text.extend_from_slice(&listed);
    text
}

/// `ERR unknown subcommand 'foo'. Try CONFIG HELP.`: the subcommand cut to 128 bytes, the
/// command uppercased.
pub fn err_unknown_subcommand(command: &str, subcommand: &[u8]) -> String {
    let subcommand = &subcommand[..subcommand.len().min(UNKNOWN_COMMAND_TEXT_MAX)];
    format!(
        "ERR unknown subcommand '{}'. Try {} HELP.",
        String::from_utf8_lossy(subcommand),
        command.to_ascii_uppercase()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arity_lowercases_the_name() {
        assert_eq!(
            err_wrong_arity("GeT"),
            "ERR wrong number of arguments for 'get' command"
        );
    }

    #[test]
    fn unknown_command_quotes_each_argument() {
        let text = String::from_utf8(err_unknown_command(b"foo", [&b"a"[..], b"b"])).unwrap();
        assert_eq!(
            text,
            "ERR unknown command 'foo', with args beginning with: 'a' 'b' "
        );
        let text = String::from_utf8(err_unknown_command(b"FOO", [])).unwrap();
        assert_eq!(
            text,
            "ERR unknown command 'FOO', with args beginning with: "
        );
    }

    #[test]
    fn unknown_command_spends_a_128_byte_budget() {
        let long = [b'x'; 200];
        let name = [b'n'; 130];
        let text = String::from_utf8(err_unknown_command(&name, [&long[..], b"never"])).unwrap();
        let expected = format!(
            "ERR unknown command '{}', with args beginning with: '{}' ",
            "n".repeat(128),
            "x".repeat(128)
        );
        assert_eq!(text, expected);

        // 40 + 3 bytes per argument: after three (129 bytes) the budget is spent.
        let arg = [b'y'; 40];
        let text = String::from_utf8(err_unknown_command(b"f", [&arg[..]; 5])).unwrap();
        let one = format!("'{}' ", "y".repeat(40));
        assert_eq!(
            text,
            format!(
                "ERR unknown command 'f', with args beginning with: {}",
                one.repeat(3)
            )
        );

        // 120 + 3 bytes, then the next argument is cut to the 5 bytes left.
        let text = String::from_utf8(err_unknown_command(
            b"f",
            [&[b'z'; 120][..], b"abcdefgh", b"no"],
        ))
        .unwrap();
        assert!(
            text.ends_with(&format!("'{}' 'abcde' ", "z".repeat(120))),
            "{text}"
        );
    }

    #[test]
    fn unknown_command_echoes_bytes_that_are_not_utf8() {
        let text = err_unknown_command(b"f\xff", [&b"\x8a"[..]]);
        assert_eq!(
            text,
            b"ERR unknown command 'f\xff', with args beginning with: '\x8a' "
        );
    }

    #[test]
    fn unknown_subcommand_names_the_help() {
        assert_eq!(
            err_unknown_subcommand("config", b"foo"),
            "ERR unknown subcommand 'foo'. Try CONFIG HELP."
        );
    }

    #[test]
    fn protocol_errors_carry_the_err_code() {
        assert_eq!(
            err_protocol(&ProtocolError::InvalidBulkLength),
            "ERR Protocol error: invalid bulk length"
        );
    }
}
