fn main() { println!("kvw"); }
