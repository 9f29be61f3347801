//! Every server reads one store from the environment; two at once is an error that names
//! them, with exit code 2, before anything listens.

use std::process::Command;

fn run(bin: &str) -> (Option<i32>, String) {
    let out = Command::new(bin)
        .env("REDIS_URL", "redis://127.0.0.1:1/")
        .env("REDIS_CLUSTER", "127.0.0.1:2,127.0.0.1:3")
        .env_remove("REDIS_SENTINEL")
        .output()
        .expect("the example binary runs");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn two_store_variables_are_refused_with_exit_code_2() {
    for bin in [
        env!("CARGO_BIN_EXE_quiz-night"),
        env!("CARGO_BIN_EXE_ask-ai"),
        env!("CARGO_BIN_EXE_food-api"),
        env!("CARGO_BIN_EXE_platform"),
        env!("CARGO_BIN_EXE_bench-server"),
    ] {
        let (code, stderr) = run(bin);
        assert_eq!(code, Some(2), "{bin}: {stderr}");
        assert!(
            stderr.contains("REDIS_URL") && stderr.contains("REDIS_CLUSTER"),
            "{bin}: {stderr}"
        );
    }
}
