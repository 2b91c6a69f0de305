//! Every single bit flip in a small log is caught, never accepted silently: in the file header
//! the log is refused; in the last record it is a torn tail (recovery drops that record, which a
//! crash could also have cut); in any other record it is corruption, reported with the file and
//! the record's offset, with the records before it intact.

use directkv_persist::fs::RealFs;
use directkv_persist::log::{self, LogEnd, LogLimits, LOG_HEADER_BYTES};

use crate::common::{payload, write_log, TestDir};

#[test]
fn every_bit_flip_is_a_refusal_a_torn_tail_or_corruption_at_the_right_offset() {
    let dir = TestDir::new("flips");
    let clean = dir.join("clean.dkvl");
    let n = 8u64;
    let offsets = write_log(&clean, n);
    let bytes = std::fs::read(&clean).unwrap();
    let path = dir.join("flipped.dkvl");
    let last = offsets[n as usize - 1];
    for at in 0..bytes.len() {
        for bit in 0..8 {
            let mut b = bytes.clone();
            b[at] ^= 1 << bit;
            crate::common::rewrite(&path, &b);
            let mut seen = vec![];
            let scanned = log::scan(&RealFs, &path, LogLimits::default(), |lsn, p| {
                seen.push((lsn, p.to_vec()));
                Ok(())
            });
            let what = format!("byte {at} bit {bit}");
            if at < LOG_HEADER_BYTES {
                let e = scanned.expect_err(&what).to_string();
                assert!(
                    e.contains("flipped.dkvl") && e.contains("offset 0"),
                    "{what}: {e}"
                );
                continue;
            }
            let s = scanned.unwrap();
            // The record the flipped byte is in.
            let k = offsets.iter().rposition(|&o| o <= at as u64).unwrap() as u64;
            assert_eq!(s.records, k, "{what}");
            let want: Vec<(u64, Vec<u8>)> = (0..k).map(|i| (i + 1, payload(i))).collect();
            assert_eq!(seen, want, "{what}");
            let rec = offsets[k as usize];
            if rec == last {
                assert_eq!(
                    s.end,
                    LogEnd::TornTail {
                        offset: last,
                        bytes_dropped: bytes.len() as u64 - last
                    },
                    "{what}"
                );
            } else {
                assert!(
                    matches!(s.end, LogEnd::Corrupt { offset, next_good, .. }
                        if offset == rec && next_good == offsets[k as usize + 1]),
                    "{what}: {:?}",
                    s.end
                );
                let e = log::replay(&RealFs, &path, LogLimits::default(), |_, _| Ok(()))
                    .unwrap_err()
                    .to_string();
                assert!(
                    e.contains("flipped.dkvl") && e.contains(&format!("corrupt at offset {rec}")),
                    "{what}: {e}"
                );
            }
        }
    }
}

#[test]
fn a_record_that_reappears_with_an_old_lsn_is_not_replayed_twice() {
    // A good record whose lsn is not the next one (bytes of an older log pasted in) is damage.
    let dir = TestDir::new("dup");
    let path = dir.join("l.dkvl");
    let offsets = write_log(&path, 4);
    let mut b = std::fs::read(&path).unwrap();
    let second = b[offsets[1] as usize..offsets[2] as usize].to_vec();
    b.extend_from_slice(&second);
    crate::common::rewrite(&path, &b);
    let s = log::scan(&RealFs, &path, LogLimits::default(), |_, _| Ok(())).unwrap();
    assert_eq!(s.records, 4);
    assert!(matches!(s.end, LogEnd::TornTail { offset, .. } if offset == offsets[4]));
}
