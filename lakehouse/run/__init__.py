"""Running a pipeline: the wiring of the layers into one run (:mod:`.pipeline`), the streaming
queries of a continuous run (:mod:`.queries`), what a run did (:mod:`.summary`, :mod:`.event_log`),
and what happens before a run writes: the warehouse's lease (:mod:`.lease`), start-up checks of
its state (:mod:`.state_check`), the entities it finds (:mod:`.entities`), and finishing a
rebuild a crash cut short (:mod:`.recovery`, by the two ways of installing rebuilt tables:
:mod:`.swap` and :mod:`.commit_swap`)."""
