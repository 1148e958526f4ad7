//! Fuzzes the Paddle stream reader: arbitrary bytes must give a tensor or an
//! error, never a panic; whatever reads must write back and re-read identically.
#![no_main]

use libfuzzer_sys::fuzz_target;
use lodt::paddle;

fuzz_target!(|data: &[u8]| {
    if let Ok(tensor) = paddle::read_tensor(data) {
        let bytes = paddle::to_bytes(&tensor).expect("a tensor read from Paddle bytes writes back");
        let again = paddle::read_tensor(&bytes).expect("written bytes read back");
        assert_eq!(again, tensor);
        // Writing is canonical: a second round gives the same bytes.
        assert_eq!(paddle::to_bytes(&again).expect("writes"), bytes);
        // The stream reader agrees with the slice reader.
        assert_eq!(paddle::read_tensor_from(data).expect("stream read"), tensor);
    } else {
        assert!(paddle::read_tensor_from(data).is_err());
    }
    match paddle::read_combined(data) {
        Ok(tensors) => {
            let bytes = paddle::combined_to_bytes(&tensors).expect("combined writes back");
            let again = paddle::read_combined(&bytes).expect("combined reads back");
            assert_eq!(again, tensors);
            assert_eq!(paddle::read_combined_from(data).expect("stream read"), tensors);
        }
        Err(err) => {
            assert!(!err.to_string().is_empty());
            assert!(paddle::read_combined_from(data).is_err());
        }
    }
});
