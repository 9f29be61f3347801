//! Prints what each algorithm admits of the same bursty traffic, on a simulated clock.
//!
//! `cargo run -p ratekeeper-examples --bin simulate`

fn main() {
    match ratekeeper_examples::simulate::run() {
        Ok(report) => print!("{report}"),
        Err(e) => {
            eprintln!("simulate: {e}");
            std::process::exit(2);
        }
    }
}
