//! The event columns of a report: which events are shown, in which order, and
//! which ones sort the summaries (`--show`, `--sort`).

use super::error::AnnotateError;

/// The events of the profiles and the columns the report shows.
#[derive(Clone, Debug)]
pub(crate) struct EventColumns {
    /// The events recorded, in file order.
    pub names: Vec<String>,
    /// The columns shown: indices into `names`.
    pub show: Vec<usize>,
    /// The sort keys, primary first: indices into `names`.
    pub sort: Vec<usize>,
}

impl EventColumns {
    /// The columns for `names` after `--show` and `--sort`.
    pub fn new(
        names: Vec<String>,
        show: Option<&[String]>,
        sort: Option<&[String]>,
    ) -> Result<EventColumns, AnnotateError> {
        let show = indices(&names, show, "--show")?;
        let sort = indices(&names, sort, "--sort")?;
        Ok(EventColumns { names, show, sort })
    }

    /// The primary sort event, which the threshold applies to.
    pub fn primary(&self) -> usize {
        self.sort.first().copied().unwrap_or(0)
    }

    /// The names of the shown events.
    pub fn shown_names(&self) -> impl Iterator<Item = &str> {
        self.show.iter().map(|&i| self.names[i].as_str())
    }

    /// The names of the sort events.
    pub fn sort_names(&self) -> impl Iterator<Item = &str> {
        self.sort.iter().map(|&i| self.names[i].as_str())
    }
}

fn indices(
    names: &[String],
    asked: Option<&[String]>,
    option: &'static str,
) -> Result<Vec<usize>, AnnotateError> {
    let Some(asked) = asked.filter(|asked| !asked.is_empty()) else {
        return Ok((0..names.len()).collect());
    };
    asked
        .iter()
        .map(|event| {
            names
                .iter()
                .position(|name| name == event)
                .ok_or_else(|| AnnotateError::UnknownEvent {
                    option,
                    event: event.clone(),
                    available: names.join(" "),
                })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names() -> Vec<String> {
        ["Ir", "Dr", "Dw"].map(String::from).to_vec()
    }

    #[test]
    fn defaults_are_the_file_order() {
        let columns = EventColumns::new(names(), None, None).unwrap();
        assert_eq!((columns.show, columns.sort), (vec![0, 1, 2], vec![0, 1, 2]));
    }

    #[test]
    fn show_and_sort_pick_columns() {
        let show = ["Dw".to_string(), "Ir".to_string()];
        let sort = ["Dr".to_string()];
        let columns = EventColumns::new(names(), Some(&show), Some(&sort)).unwrap();
        assert_eq!((&columns.show, &columns.sort), (&vec![2, 0], &vec![1]));
        assert_eq!(columns.primary(), 1);
    }

    #[test]
    fn unknown_events_are_named() {
        let show = ["Ir".to_string(), "Bc".to_string()];
        let error = EventColumns::new(names(), Some(&show), None).unwrap_err();
        assert_eq!(
            error.to_string(),
            "--show: unknown event 'Bc' (the profiles have: Ir Dr Dw)"
        );
    }
}
