//! The native protocol mirrors the engine's numbers (it may not depend on the engine): opcodes,
//! element types, function ids and status codes must agree, or the server would mistranslate.

use directkv_engine::ops::{self, ElemType};
use directkv_engine::{OpError, OpKind, Status};
use directkv_proto::native::{self, func, status, ElemCode, OpCode, OP_CODE_KEYSPACE_MIN};

#[test]
fn opcodes_and_element_types_agree() {
    for op in OpCode::ALL {
        // The keyspace operations (exists, type, scan) are answered by the server.
        if !op.is_engine() {
            assert!(op.code() >= OP_CODE_KEYSPACE_MIN && OpKind::from_code(op.code()).is_none());
            continue;
        }
        let kind = OpKind::from_code(op.code()).expect("every wire opcode is an engine operation");
        assert_eq!(kind as u8, op.code(), "{op:?}");
        assert_eq!(kind.name(), op.name(), "{op:?}");
        assert_eq!(kind.writes(), !op.is_read_only(), "{op:?}");
    }
    // Every engine kind but the memcache ones (served on the memcached port) has a wire opcode.
    let engine_ops = OpCode::ALL.iter().filter(|op| op.is_engine()).count();
    let kinds = OpKind::ALL.iter().filter(|k| !k.is_memcache()).count();
    assert_eq!(engine_ops, kinds);
    // Deadlines: the argument bytes, conditions and special deadlines.
    assert_eq!(
        native::expire_args(123_456, native::cond::XX | native::cond::LT),
        directkv_engine::expire_args(
            123_456,
            directkv_engine::cond::XX | directkv_engine::cond::LT
        )
    );
    for (wire, engine) in [
        (native::cond::ANY, directkv_engine::cond::ANY),
        (native::cond::NX, directkv_engine::cond::NX),
        (native::cond::XX, directkv_engine::cond::XX),
        (native::cond::GT, directkv_engine::cond::GT),
        (native::cond::LT, directkv_engine::cond::LT),
    ] {
        assert_eq!(wire, engine);
    }
    assert_eq!(native::KEEP_DEADLINE, directkv_engine::KEEP_DEADLINE);
    assert_eq!(native::NO_DEADLINE, directkv_engine::NO_DEADLINE);
    for e in ElemCode::ALL {
        let t = ElemType::from_code(e.code()).unwrap();
        assert_eq!(t.width(), e.width(), "{e:?}");
    }
}

#[test]
fn function_ids_and_statuses_agree() {
    let pairs = [
        (func::ADD, ops::FN_ADD),
        (func::SUB, ops::FN_SUB),
        (func::MUL, ops::FN_MUL),
        (func::MIN, ops::FN_MIN),
        (func::MAX, ops::FN_MAX),
        (func::AND, ops::FN_AND),
        (func::OR, ops::FN_OR),
        (func::XOR, ops::FN_XOR),
        (func::SWAP, ops::FN_SWAP),
        (func::CAS, ops::FN_CAS),
        (func::SAT_ADD, ops::FN_SAT_ADD),
        (func::SAT_SUB, ops::FN_SAT_SUB),
        (func::DIV, ops::FN_DIV),
        (func::SUM, ops::FN_SUM),
        (func::RMIN, ops::FN_RMIN),
        (func::RMAX, ops::FN_RMAX),
        (func::COUNT, ops::FN_COUNT),
        (func::COUNT_NONZERO, ops::FN_COUNT_NONZERO),
        (func::EQ, ops::FN_EQ),
        (func::NE, ops::FN_NE),
        (func::LT, ops::FN_LT),
        (func::LE, ops::FN_LE),
        (func::GT, ops::FN_GT),
        (func::GE, ops::FN_GE),
        (func::NONZERO, ops::FN_NONZERO),
        (func::USER_MIN, ops::USER_FUNCTION_ID_MIN),
    ];
    for (wire, engine) in pairs {
        assert_eq!(wire, engine);
    }
    assert_eq!(status::OK, Status::Ok.code());
    assert_eq!(status::NOT_FOUND, Status::NotFound.code());
    assert_eq!(status::ERR_NOT_AN_INTEGER, OpError::NotAnInteger.code());
    assert_eq!(status::ERR_NOT_A_FLOAT, OpError::NotAFloat.code());
    assert_eq!(status::ERR_OVERFLOW, OpError::Overflow.code());
    assert_eq!(status::ERR_NAN_OR_INFINITY, OpError::NanOrInfinity.code());
    assert_eq!(
        status::ERR_REPLY_TOO_LARGE,
        OpError::ReplyTooLarge { max: 0 }.code()
    );
    assert_eq!(status::ERR_BAD_DEADLINE, OpError::BadDeadline.code());
    assert_eq!(status::NOT_STORED, Status::NotStored.code());
    // Status bit 6 means "data follows" on the wire, so engine error codes must stay below 64.
    for e in [
        OpError::Overflow,
        OpError::NanOrInfinity,
        OpError::NotAFloat,
        OpError::NotAnInteger,
        OpError::OutOfMemory,
    ] {
        assert!(e.code() < 64, "{e:?}");
    }
}
