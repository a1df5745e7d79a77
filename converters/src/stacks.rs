//! Weighted call stacks of one event, rebuilt from a profile: the common input of
//! the folded, flame graph, pprof and speedscope outputs.
//!
//! A Cachegrind file has no calls: every function is a one-frame stack weighted
//! with its self cost.
//!
//! A Callgrind file has call arcs (`calls=` lines), one per caller and callee, not
//! the stacks they were made in, so the stacks are an approximation:
//!
//! - Each function's self cost is shared among its callers in proportion to the
//!   inclusive cost of the chosen event on each caller's arcs to it (where all of
//!   those are zero — Valgrind gives no inclusive cache-use costs — in proportion
//!   to the call counts); each caller's share is shared among *its* callers the
//!   same way, and so on up. A function without callers (`(below main)`, a thread
//!   start, a signal handler) starts a stack.
//! - A caller that is already on the path being built (recursion through several
//!   functions, or `fn` → `fn'2` → `fn`) is skipped and the other callers share its
//!   part. Recursion so appears as one level per distinct name (`main;fib;fib'2`,
//!   as Callgrind names deeper recursion).
//! - Where all callers of a function are on the path (mutual recursion: `odd'2`
//!   is called only by `even'2`, already on the path), the path goes on along the
//!   shortest way up from there to a function without callers, which passes a
//!   function again as real recursion does (`main;even;odd;even'2;odd'2;even'2`).
//!   Only a cycle that no function without callers reaches is cut: its stacks
//!   start inside it.
//! - Stacks stop growing at [`MAX_DEPTH`] frames. A share smaller than a
//!   hundred-thousandth of the total goes on only through the caller with the
//!   largest weight, and after 20 million steps (a huge, densely connected call
//!   graph) all shares do: this bounds the work without changing any total.
//! - Shares are whole numbers (largest-remainder apportionment), so the weights of
//!   the stacks ending in a function add up exactly to its self cost, and the
//!   weights of all stacks to the total of the event (the sum of the self costs).
//!
//! A profile of several parts is added up: self costs and arcs of all parts count
//! together. Functions are told apart by (object, file, name), as the formats do.

mod graph;
mod names;
mod tree;
mod walk;

use cgx_formats::Profile;

use graph::Graph;
use tree::CallerTree;

/// The most frames a stack has; a path that reaches it is cut there.
pub const MAX_DEPTH: usize = 256;

/// One function as a frame of the stacks.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Frame {
    /// The name shown: the function's name; when the profile has other functions
    /// of that name, followed by ` [OBJECT]` (the object's file name without its
    /// folder) if that tells them apart, else by ` [OBJECT:FILE]` (` [FILE]` in a
    /// Cachegrind file, which names no objects).
    pub name: String,
    /// The function's name as the profile has it.
    pub function: String,
    /// The function's source file (`fl=`), possibly empty or `???`.
    pub file: String,
    /// The function's object (`ob=`), empty in Cachegrind files.
    pub object: String,
}

/// A call stack and the cost charged to it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Stack {
    /// Indices into [`Stacks::frames`], outermost caller first.
    pub frames: Vec<usize>,
    /// The cost of the event charged to this stack (never zero).
    pub weight: u64,
}

/// The weighted stacks of one event of a profile.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Stacks {
    /// The event the weights count.
    pub event: String,
    /// The profiled command (`cmd:` of the first part), if the profile names it.
    pub command: Option<String>,
    /// The functions that appear in the stacks, sorted by name.
    pub frames: Vec<Frame>,
    /// Distinct stacks, sorted by their frames' names.
    pub stacks: Vec<Stack>,
    /// The sum of the self costs of the event: what the weights add up to.
    pub total: u64,
}

impl Stacks {
    /// The names of a stack's frames, outermost caller first.
    pub fn names<'a>(&'a self, stack: &'a Stack) -> impl Iterator<Item = &'a str> + 'a {
        stack
            .frames
            .iter()
            .map(move |&frame| self.frames[frame].name.as_str())
    }

    /// A title for pictures of these stacks: `COMMAND — EVENT`, or `EVENT` alone
    /// when the command is unknown.
    pub fn title(&self) -> String {
        match &self.command {
            Some(command) => format!("{command} — {}", self.event),
            None => self.event.clone(),
        }
    }
}

/// Why stacks cannot be built.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum StacksError {
    /// The profile has no parts, so no events.
    #[error("the profile has no parts")]
    Empty,
    /// The event asked for is not in the profile.
    #[error("no event '{event}' in the profile; its events are: {}", available.join(" "))]
    UnknownEvent {
        /// The event asked for.
        event: String,
        /// The events of the profile (of its first part).
        available: Vec<String>,
    },
    /// A later part lacks the event.
    #[error("part {part} has no event '{event}'; its events are: {}", available.join(" "))]
    MissingInPart {
        /// The 1-based number of the part.
        part: usize,
        /// The event asked for.
        event: String,
        /// The events of that part.
        available: Vec<String>,
    },
}

/// Builds the stacks of `event` (by default the first event of the first part)
/// from `profile`, as the module documentation describes.
pub fn build(profile: &Profile, event: Option<&str>) -> Result<Stacks, StacksError> {
    let first = profile.parts.first().ok_or(StacksError::Empty)?;
    let event = match event {
        Some(event) => event,
        None => first.events.names.first().ok_or(StacksError::Empty)?,
    };
    if first.events.index_of(event).is_none() {
        return Err(StacksError::UnknownEvent {
            event: event.to_string(),
            available: first.events.names.clone(),
        });
    }
    let graph = Graph::of(profile, event)?;
    let tree = walk::walk(&graph);
    Ok(assemble(profile, &graph, event, &tree))
}

/// Names the frames and sorts the stacks.
fn assemble(profile: &Profile, graph: &Graph, event: &str, tree: &CallerTree) -> Stacks {
    // Frames in first-use order of the functions that appear in stacks.
    let mut frame_of: Vec<Option<usize>> = vec![None; graph.nodes.len()];
    let mut used: Vec<usize> = Vec::new();
    let mut stacks: Vec<Stack> = tree
        .stacks()
        .map(|(functions, weight)| Stack {
            frames: functions
                .into_iter()
                .map(|node| {
                    *frame_of[node].get_or_insert_with(|| {
                        used.push(node);
                        used.len() - 1
                    })
                })
                .collect(),
            weight,
        })
        .collect();
    let frames = names::frames(profile, graph, &used);
    // Number the frames in the order of their names, so that comparing frame
    // numbers compares names.
    let mut order: Vec<usize> = (0..frames.len()).collect();
    order.sort_by(|&a, &b| frames[a].name.cmp(&frames[b].name));
    let mut rank = vec![0; frames.len()];
    for (position, &frame) in order.iter().enumerate() {
        rank[frame] = position;
    }
    let mut frames: Vec<Option<Frame>> = frames.into_iter().map(Some).collect();
    let frames: Vec<Frame> = order
        .iter()
        .filter_map(|&frame| frames.get_mut(frame).and_then(Option::take))
        .collect();
    for stack in &mut stacks {
        for frame in &mut stack.frames {
            *frame = rank[*frame];
        }
    }
    stacks.sort_unstable_by(|a, b| a.frames.cmp(&b.frames));
    // The walk may charge a path more than once.
    stacks.dedup_by(|later, earlier| {
        let same = later.frames == earlier.frames;
        if same {
            earlier.weight = earlier.weight.saturating_add(later.weight);
        }
        same
    });
    Stacks {
        event: event.to_string(),
        command: profile
            .parts
            .first()
            .and_then(|part| part.header.cmd.clone()),
        frames,
        stacks,
        total: graph.total,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cgx_formats::read;

    fn stacks_of(text: &str, event: Option<&str>) -> Stacks {
        let profile =
            read(std::io::Cursor::new(text.to_string()), "test").expect("a valid profile");
        build(&profile, event).expect("stacks")
    }

    fn folded(stacks: &Stacks) -> Vec<String> {
        stacks
            .stacks
            .iter()
            .map(|stack| {
                let names: Vec<&str> = stacks.names(stack).collect();
                format!("{} {}", names.join(";"), stack.weight)
            })
            .collect()
    }

    /// main → a → c, main → b; self costs 5, 20, 10, 20.
    const TREE: &str = "# callgrind format\nevents: Ir Dr\ncmd: ./tree\n\
        fl=t.c\nfn=main\n1 5 1\ncfn=a\ncalls=1 10\n2 30 3\ncfn=b\ncalls=1 20\n3 20 0\n\
        fn=a\n10 20 2\ncfn=c\ncalls=2 30\n11 10 1\n\
        fn=b\n20 20 0\n\
        fn=c\n30 10 1\n";

    #[test]
    fn a_tree_comes_back_as_it_is() {
        let stacks = stacks_of(TREE, None);
        assert_eq!(stacks.event, "Ir");
        assert_eq!(stacks.total, 55);
        assert_eq!(stacks.title(), "./tree — Ir");
        assert_eq!(
            folded(&stacks),
            ["main 5", "main;a 20", "main;a;c 10", "main;b 20"]
        );
        let dr = stacks_of(TREE, Some("Dr"));
        assert_eq!(dr.total, 4);
        assert_eq!(folded(&dr), ["main 1", "main;a 2", "main;a;c 1"]);
    }

    #[test]
    fn unknown_events_are_named() {
        let profile = read(TREE.as_bytes(), "test").expect("a valid profile");
        let error = build(&profile, Some("D1mr")).expect_err("no such event");
        assert_eq!(
            error.to_string(),
            "no event 'D1mr' in the profile; its events are: Ir Dr"
        );
        assert_eq!(build(&Profile::default(), None), Err(StacksError::Empty));
    }

    /// A callee shared by two callers gets its self cost split by the arcs'
    /// inclusive costs, exactly.
    #[test]
    fn shared_callees_are_split_by_inclusive_cost() {
        let text = "events: Ir\nfl=s.c\nfn=main\n1 1\n\
            cfn=a\ncalls=1 10\n2 7\ncfn=b\ncalls=1 20\n3 5\n\
            fn=a\n10 3\ncfn=c\ncalls=1 30\n11 4\n\
            fn=b\n20 3\ncfn=c\ncalls=1 30\n21 2\n\
            fn=c\n30 6\n";
        let stacks = stacks_of(text, None);
        assert_eq!(
            folded(&stacks),
            ["main 1", "main;a 3", "main;a;c 4", "main;b 3", "main;b;c 2"]
        );
    }

    /// Mutual recursion named as Callgrind names it: even → odd → even'2 →
    /// odd'2 → even'2. even'2's cost goes 80:60 to its callers odd and odd'2;
    /// odd'2's only caller is even'2, on the path, so that share goes on by the
    /// shortest way up, through even'2 again. Every stack starts at main.
    #[test]
    fn recursion_stays_below_its_root() {
        let text = "events: Ir\nfl=r.c\nfn=main\n1 1\ncfn=even\ncalls=1 10\n2 100\n\
            fn=even\n10 10\ncfn=odd\ncalls=1 20\n11 90\n\
            fn=odd\n20 10\ncfn=even'2\ncalls=1 10\n21 80\n\
            fn=even'2\n10 40\ncfn=odd'2\ncalls=4 20\n11 70\n\
            fn=odd'2\n20 40\ncfn=even'2\ncalls=3 10\n21 60\n";
        let stacks = stacks_of(text, None);
        let lines = folded(&stacks);
        assert!(
            lines.iter().all(|line| line.starts_with("main")),
            "{lines:?}"
        );
        assert_eq!(
            lines,
            [
                "main 1",
                "main;even 10",
                "main;even;odd 10",
                "main;even;odd;even'2 23",
                "main;even;odd;even'2;odd'2 40",
                "main;even;odd;even'2;odd'2;even'2 17"
            ]
        );
        assert_eq!(stacks.total, 101);
    }

    /// A cycle that nothing outside it calls keeps its costs, in stacks that
    /// start inside it.
    #[test]
    fn unreachable_cycles_keep_their_cost() {
        let text = "events: Ir\nfl=u.c\nfn=x\n1 3\ncfn=y\ncalls=1 10\n2 5\n\
            fn=y\n10 5\ncfn=x\ncalls=1 1\n11 8\n";
        let stacks = stacks_of(text, None);
        assert_eq!(folded(&stacks), ["x;y 5", "y;x 3"]);
    }

    /// Arcs without inclusive cost of the event (Valgrind's cache-use events)
    /// share by call counts.
    #[test]
    fn call_counts_stand_in_for_missing_inclusive_costs() {
        let text = "events: Ir AcCost1\nfl=c.c\nfn=main\n1 1 0\n\
            cfn=a\ncalls=3 10\n2 10 0\ncfn=b\ncalls=1 20\n3 10 0\n\
            fn=a\n10 5 0\ncfn=c\ncalls=3 30\n11 5 0\n\
            fn=b\n20 5 0\ncfn=c\ncalls=1 30\n21 5 0\n\
            fn=c\n30 10 8\n";
        let stacks = stacks_of(text, Some("AcCost1"));
        assert_eq!(folded(&stacks), ["main;a;c 6", "main;b;c 2"]);
    }

    /// Parts are added up; functions of the same name in different files get
    /// their file in the frame's name.
    #[test]
    fn parts_add_up_and_same_names_are_told_apart() {
        let text = "events: Ir\nfl=one.c\nfn=main\n1 2\ncfl=two.c\ncfn=helper\ncalls=1 10\n2 3\n\
            fl=two.c\nfn=helper\n10 3\n\
            part: 2\nevents: Ir\nfl=one.c\nfn=main\n1 4\ncfn=helper\ncalls=1 10\n2 7\n\
            fn=helper\n10 7\n";
        let stacks = stacks_of(text, None);
        assert_eq!(stacks.total, 16);
        assert_eq!(
            folded(&stacks),
            ["main 6", "main;helper [one.c] 7", "main;helper [two.c] 3"]
        );
    }

    /// A Cachegrind file: one-frame stacks.
    #[test]
    fn cachegrind_functions_are_single_frames() {
        let text = "events: Ir Dr\nfl=a.c\nfn=f\n1 4 1\n2 6 0\nfn=g\n3 5 5\n";
        let stacks = stacks_of(text, Some("Ir"));
        assert_eq!(folded(&stacks), ["f 10", "g 5"]);
    }
}
