"""The course's content, apart from the library it teaches.

* :mod:`~nsqviz.teaching.course` -- the notebooks' reading order and time estimates;
* :mod:`~nsqviz.teaching.reference` -- the NSQ reference card, rendered from the tables;
* :mod:`~nsqviz.teaching.exercises` -- each notebook's questions, answers checked by code;
* :mod:`~nsqviz.teaching.labs` -- notebook 04's failure labs against any nsqd, side by side.

Each module keeps a notebook true to the code (``python -m nsqviz.teaching.X`` rewrites
it; a test fails when it is stale). The library never imports from here.
"""
