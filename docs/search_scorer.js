// The site search's scorer (conf.py's html_search_scorer; Sphinx's searchtools.js uses it
// in place of its own). The site is a course first: a reader who types "heartbeats" wants
// the section that teaches them before an API property of the same name. Sphinx's weights
// are kept; score() then raises every match on a section title by 15 -- above any object's
// name (at most 11 + 15 for an "important" object, 11 + 5 for a method or property) -- and,
// among the notebooks, an earlier one a little: the course introduces a subject before the
// notebooks that use it (02 teaches heartbeats, 10 counts them on Spark).
var Scorer = {
  score: (result) => {
    const [docname, , , , score, , kind] = result;
    if (kind !== "title") return score;
    const chapter = /^notebooks\/(\d\d)-/.exec(docname);
    return score + 15 + (chapter ? (12 - Number(chapter[1])) / 2 : 0);
  },
  objNameMatch: 11,
  objPartialMatch: 6,
  objPrio: {0: 15, 1: 5, 2: -5},
  objPrioDefault: 0,
  title: 15,
  partialTitle: 7,
  term: 5,
  partialTerm: 2,
};
