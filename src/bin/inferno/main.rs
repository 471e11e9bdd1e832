//! `inferno`: the command-line front end of `inferno-cpu`.

fn main() {
    println!("inferno: nothing here yet");
}
