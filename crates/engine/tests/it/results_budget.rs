//! A batch's results are bounded by `results_bytes_max` (issue 19 item 5): 4096 GETs of a
//! 1 MiB value once overflowed the 32-bit result offsets and panicked; now the operations past
//! the budget get `ReplyTooLarge` and no data, and the engine keeps working.

use directkv_engine::{
    Engine, EngineConfig, Op, OpError, Results, Status, RESULTS_BYTES_MAX_DEFAULT,
};

#[test]
fn gets_past_the_results_budget_are_refused_with_reply_too_large() {
    let mut e = Engine::new(EngineConfig::with_memory(64 << 20)).unwrap();
    let value = vec![7u8; 1 << 20];
    e.put(b"k", &value).unwrap();
    let ops = vec![Op::get(b"k"); 4096];
    let mut out = Results::default();
    e.execute(&ops, &mut out);
    let fit = RESULTS_BYTES_MAX_DEFAULT / value.len();
    for i in 0..ops.len() {
        if i < fit {
            assert_eq!(
                (out.status(i), out.data(i)),
                (Status::Ok, &value[..]),
                "op {i}"
            );
        } else {
            let refused = Status::Error(OpError::ReplyTooLarge {
                max: RESULTS_BYTES_MAX_DEFAULT,
            });
            assert_eq!((out.status(i), out.data(i)), (refused, &[][..]), "op {i}");
        }
    }
    // The next batch starts with the whole budget again.
    e.execute(&[Op::get(b"k")], &mut out);
    assert_eq!((out.status(0), out.data(0)), (Status::Ok, &value[..]));
}

#[test]
fn a_budget_smaller_than_one_value_or_past_u32_is_a_configuration_error() {
    let mut cfg = EngineConfig::with_memory(64 << 20);
    cfg.results_bytes_max = cfg.value_len_max - 1;
    assert!(Engine::new(cfg.clone()).is_err());
    cfg.results_bytes_max = u32::MAX as usize + 1;
    assert!(Engine::new(cfg).is_err());
}
