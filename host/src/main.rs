fn main() {
    println!("{}", host::PTX.len());
}
