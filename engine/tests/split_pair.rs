//! A prefill and a decode worker as two engines joined only by a real TCP
//! bootstrap connection on 127.0.0.1: each request goes to both with the
//! same bootstrap room, as SGLang's router sends it, and the client's
//! answer is combined by the rule the router 0.3.2 was observed to follow
//! (decode's error first, then prefill's, else decode's answer).

use std::net::TcpListener;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use kvw_engine::attention;
use kvw_engine::config::{incident_config, ValidConfig};
use kvw_engine::live::PrefixCacheMode;
use kvw_engine::live::{live_costs, BootstrapFields, LiveAnswer, LiveConfig, LiveEngine, Submit};
use kvw_engine::sim::Role;
use kvw_evidence::{Fix, PoisonMode, Scale};

fn config(fixes: &[Fix], decode_pool: u64) -> LiveConfig {
    let mut probe = incident_config(Scale::Incident, fixes, PoisonMode::Off, 1)
        .unwrap()
        .into_inner();
    probe.context_len = 8192;
    probe.prefill_pool_tokens = 4096;
    probe.decode_pool_tokens = decode_pool;
    probe.page_size = 16;
    probe.waiting_timeout_s = 1;
    LiveConfig {
        probe: ValidConfig::new(probe).unwrap(),
        costs: live_costs(),
        prefix_cache: PrefixCacheMode::Off,
        cache_blocks: 0,
        early_reject: false,
        clock_scale: 1,
        late_write: None,
    }
}

struct Pair {
    prefill: LiveEngine,
    decode: LiveEngine,
    bootstrap: std::net::SocketAddr,
    next_room: u64,
}

impl Pair {
    fn start(prefill_fixes: &[Fix], decode_fixes: &[Fix], decode_pool: u64) -> Pair {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let bootstrap = listener.local_addr().unwrap();
        Pair {
            prefill: LiveEngine::start_split(
                config(prefill_fixes, 16384),
                Role::Prefill,
                Some(listener),
            )
            .unwrap(),
            decode: LiveEngine::start_split(config(decode_fixes, decode_pool), Role::Decode, None)
                .unwrap(),
            bootstrap,
            next_room: 7_000_000_000_000,
        }
    }

    /// Both workers' answers to one request.
    fn ask(&mut self, tenant: &str, text: &str) -> (LiveAnswer, LiveAnswer) {
        self.next_room += 1;
        let room = self.next_room;
        let send = |engine: &LiveEngine, prefill| {
            let bootstrap = Some(BootstrapFields { room, prefill });
            let (submit, rx) = Submit::on_channel(tenant, attention::encode(text), 24, bootstrap);
            engine.submit(submit).unwrap();
            rx
        };
        let p = send(&self.prefill, None);
        let d = send(&self.decode, Some(self.bootstrap));
        let wait = Duration::from_secs(30);
        (p.recv_timeout(wait).unwrap(), d.recv_timeout(wait).unwrap())
    }
}

/// What the client gets from SGLang's router 0.3.2 once both answered.
fn router(prefill: &LiveAnswer, decode: &LiveAnswer) -> (u16, String) {
    if decode.status >= 300 {
        (decode.status, decode.text.clone())
    } else if prefill.status >= 300 {
        (prefill.status, prefill.text.clone())
    } else {
        (decode.status, decode.text.clone())
    }
}

fn doc(canary: &str, len: usize) -> String {
    let mut s = String::from("^");
    while s.len() < len {
        s.push_str(canary);
        s.push(' ');
    }
    s.truncate(len);
    s
}

const CANARY: &str = "CANARY-globex-77aa";

/// globex's request, then umbrella's over-pool prompt; returns the router's
/// answer to umbrella and both workers' answers.
fn incident(pair: &mut Pair) -> ((u16, String), LiveAnswer, LiveAnswer) {
    let (p, d) = pair.ask("globex", &doc(CANARY, 3000));
    assert_eq!((p.status, d.status), (200, 200), "{p:?} {d:?}");
    assert!(d.text.starts_with(CANARY), "{}", d.text);
    let (p, d) = pair.ask("umbrella", &doc("CANARY-umbrella-0b0b", 6000));
    (router(&p, &d), p, d)
}

#[test]
fn pre_fix_the_pair_leaks_across_the_process_boundary() {
    let mut pair = Pair::start(&[], &[], 16384);
    let ((status, text), p, _) = incident(&mut pair);
    assert_eq!(status, 200, "{text}");
    assert!(text.contains(CANARY), "{text}");
    assert!(
        p.text.contains("FINISH_LENGTH"),
        "prefill answers 200 length (#33507): {}",
        p.text
    );
}

#[test]
fn with_every_fix_on_both_no_foreign_byte_is_read() {
    let mut pair = Pair::start(&Fix::ALL, &Fix::ALL, 16384);
    let t0 = Instant::now();
    let ((status, text), p, d) = incident(&mut pair);
    assert_eq!(p.status, 400, "prefill retires the reject (#38935)");
    assert_eq!(d.status, 500, "decode waits for KV that never comes: {d:?}");
    assert_eq!(status, 500);
    assert!(!text.contains(CANARY));
    assert!(
        t0.elapsed() >= Duration::from_millis(900),
        "after the waiting timeout"
    );
    // A decode pool no larger than prefill's rejects the prompt itself.
    let mut pair = Pair::start(&Fix::ALL, &Fix::ALL, 4096);
    let ((status, text), _, d) = incident(&mut pair);
    assert_eq!((status, d.status), (400, 400), "{text}");
}

#[test]
fn a_rolling_upgrade_leaves_each_half_with_its_own_fixes() {
    // Prefill fixed, decode not: the reject is retired, decode times out.
    let mut pair = Pair::start(&[Fix::RetireUnadmittedReject], &[], 16384);
    let ((status, text), p, d) = incident(&mut pair);
    assert_eq!((p.status, d.status, status), (400, 500, 500), "{text}");
    // Decode checks owner tags, prefill has no fix: prefill sends its one
    // page and answers 200; decode refuses the pages it never received.
    let mut pair = Pair::start(&[], &[Fix::PageTags], 16384);
    let ((status, text), p, d) = incident(&mut pair);
    assert_eq!((p.status, d.status, status), (200, 500, 500), "{text}");
    assert!(text.contains("owner tag"), "{text}");
    // Decode checks the KV checksum, prefill sends none: every handoff,
    // the ordinary one too, fails the check.
    let mut pair = Pair::start(&[], &[Fix::KvChecksum], 16384);
    let (p, d) = pair.ask("globex", &doc(CANARY, 3000));
    assert_eq!((p.status, d.status), (200, 500), "{d:?}");
    assert!(d.text.contains("checksum"), "{}", d.text);
}

#[test]
fn requests_without_the_routers_fields_or_with_a_room_in_use_are_refused() {
    let pair = Pair::start(&[], &[], 16384);
    let (submit, rx) = Submit::on_channel("t", attention::encode("hello"), 2, None);
    pair.decode.submit(submit).unwrap();
    let a = rx.recv_timeout(Duration::from_secs(5)).unwrap();
    assert_eq!(a.status, 400);
    assert!(a.text.contains("bootstrap_room"), "{}", a.text);
    // The same room twice at once on one worker.
    let send = |tx: mpsc::Sender<LiveAnswer>| Submit {
        tenant: "t".into(),
        prompt: attention::encode("hello there"),
        max_new_tokens: 2,
        cache_salt: None,
        reply: Box::new(move |a| {
            let _ = tx.send(a);
        }),
        handle: None,
        bootstrap: Some(BootstrapFields {
            room: 5,
            prefill: None,
        }),
    };
    let (tx, rx) = mpsc::channel();
    pair.prefill.submit(send(tx.clone())).unwrap();
    pair.prefill.submit(send(tx)).unwrap();
    let first = rx.recv_timeout(Duration::from_secs(5)).unwrap();
    assert_eq!(first.status, 400);
    assert!(first.text.contains("already in use"), "{}", first.text);
    // The first one never meets its decode: bootstrap timeout, 500.
    let second = rx.recv_timeout(Duration::from_secs(10)).unwrap();
    assert_eq!(second.status, 500, "{second:?}");
}

#[test]
fn pages_go_back_once_whatever_the_peer_does() {
    let mut pair = Pair::start(&[], &[], 16384);
    for i in 0..5 {
        let (p, d) = pair.ask("acme", &doc("CANARY-acme-1234", 500 + 300 * i));
        assert_eq!((p.status, d.status), (200, 200));
    }
    // Both workers forget every answered request and give every page back.
    for engine in [&pair.prefill, &pair.decode] {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let r = engine.census(Duration::from_secs(5)).unwrap();
            assert_eq!(r.double_frees, 0, "{r:?}");
            if r.decode_pages_held + r.prefill_pages_held + r.rooms + r.queued == 0 {
                break;
            }
            assert!(Instant::now() < deadline, "still held: {r:?}");
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

/// A decode worker's connection to the prefill, played by the test.
fn raw_register(pair: &Pair, room: u64, pages: Vec<u32>) -> std::net::TcpStream {
    use std::io::Write;
    let mut s = std::net::TcpStream::connect(pair.bootstrap).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(&kvw_engine::bootstrap::encode_message(&Wire::Register {
        room,
        dst_pages: pages,
    }))
    .unwrap();
    s
}

use kvw_engine::bootstrap::read_message;
use kvw_engine::sim::Wire;

#[test]
fn a_prefill_refuses_a_room_registered_twice_or_never_claimed() {
    let pair = Pair::start(&[], &[], 16384);
    let t0 = Instant::now();
    let mut first = raw_register(&pair, 41, vec![1, 2]);
    let mut second = raw_register(&pair, 41, vec![3]);
    // The two connections race: whichever registration the prefill hears
    // second is refused at once, the other waits for a request naming room
    // 41; none comes, so after the waiting timeout it is refused too.
    let mut why = [&mut first, &mut second].map(|s| read_message(s).unwrap().unwrap().unwrap_err());
    why.sort_by_key(|w| !w.contains("already has a decode receiver"));
    assert!(why[0].contains("already has a decode receiver"), "{why:?}");
    assert!(why[1].contains("not one this worker serves"), "{why:?}");
    assert!(t0.elapsed() >= Duration::from_millis(500));
    // A connection that starts with anything but a registration is closed.
    let mut s = std::net::TcpStream::connect(pair.bootstrap).unwrap();
    std::io::Write::write_all(
        &mut s,
        &kvw_engine::bootstrap::encode_message(&Wire::Ack { room: 1 }),
    )
    .unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    assert!(matches!(read_message(&mut s), Ok(None) | Err(_)));
}

/// A prefill bootstrap server played by the test: it takes decode's
/// registration, then does what `script` says with the connection.
fn fake_prefill(
    script: impl FnOnce(std::net::TcpStream, Vec<u32>, u64) + Send + 'static,
) -> std::net::SocketAddr {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    std::thread::spawn(move || {
        let (mut s, _) = l.accept().unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let Ok(Some(Ok(Wire::Register { room, dst_pages }))) = read_message(&mut s) else {
            panic!("no registration");
        };
        script(s, dst_pages, room);
    });
    addr
}

/// Decode's answer to one request whose prefill is `prefill`.
fn decode_alone(decode: &LiveEngine, prefill: std::net::SocketAddr, room: u64) -> LiveAnswer {
    let bootstrap = Some(BootstrapFields {
        room,
        prefill: Some(prefill),
    });
    let prompt = attention::encode(&doc("CANARY-acme-5151", 200));
    let (submit, rx) = Submit::on_channel("acme", prompt, 8, bootstrap);
    decode.submit(submit).unwrap();
    rx.recv_timeout(Duration::from_secs(20)).unwrap()
}

fn pages_back(engine: &LiveEngine) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let r = engine.census(Duration::from_secs(5)).unwrap();
        assert_eq!(r.double_frees, 0, "{r:?}");
        if r.decode_pages_held == 0 && r.queued == 0 && r.deferred == 0 {
            return;
        }
        assert!(Instant::now() < deadline, "still held: {r:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn decode_survives_a_prefill_that_never_sends_or_drops_mid_transfer() {
    for fixes in [vec![], Fix::ALL.to_vec()] {
        let decode = LiveEngine::start_split(config(&fixes, 16384), Role::Decode, None).unwrap();
        // Registers, then says nothing: decode's waiting timeout.
        let (held_tx, held_rx) = mpsc::channel();
        let silent = fake_prefill(move |s, _, _| {
            let _ = held_rx.recv_timeout(Duration::from_secs(20));
            drop(s);
        });
        let a = decode_alone(&decode, silent, 1);
        assert_eq!(a.status, 500, "{a:?}");
        let _ = held_tx.send(());
        pages_back(&decode);
        // Posts two writes, lands one, and hangs up.
        let dropping = fake_prefill(|mut s, dst, room| {
            use std::io::Write;
            let chunk = Wire::Chunk {
                room,
                pages: 2,
                last: true,
                checksum: None,
            };
            let page = Wire::Page {
                room,
                dst_page: dst[0],
                generation: 0,
                bytes: vec![0; 16 * 128 * 2],
            };
            for m in [chunk, page] {
                s.write_all(&kvw_engine::bootstrap::encode_message(&m))
                    .unwrap();
            }
        });
        let t0 = Instant::now();
        let a = decode_alone(&decode, dropping, 2);
        assert_eq!(a.status, 500, "{a:?}");
        assert!(
            t0.elapsed() < Duration::from_millis(900),
            "failed at once, not at the timeout"
        );
        pages_back(&decode);
        // A page for a page it never registered, or of the wrong size.
        for bad in [(u32::MAX, 16 * 128 * 2), (0, 3)] {
            let hostile = fake_prefill(move |mut s, dst, room| {
                use std::io::Write;
                let page = Wire::Page {
                    room,
                    dst_page: if bad.0 == 0 { dst[0] } else { bad.0 },
                    generation: 0,
                    bytes: vec![7; bad.1],
                };
                let _ = s.write_all(&kvw_engine::bootstrap::encode_message(&page));
                std::thread::sleep(Duration::from_secs(5));
            });
            let t0 = Instant::now();
            let a = decode_alone(&decode, hostile, 3 + bad.1 as u64);
            assert_eq!(a.status, 500, "{a:?}");
            assert!(t0.elapsed() < Duration::from_millis(900), "{a:?}");
            pages_back(&decode);
        }
        // And it keeps serving: an unreachable prefill fails fast, once.
        let gone = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap();
        let a = decode_alone(&decode, gone, 9);
        assert_eq!(a.status, 500, "{a:?}");
        pages_back(&decode);
    }
}
