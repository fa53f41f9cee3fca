"""Operations over an existing warehouse: verify (:mod:`.audit`, :mod:`.source_check`), replay
(:mod:`.replay`), forget (:mod:`.forget`), maintain (:mod:`.maintenance`), and the status report
and its page (:mod:`.status`, :mod:`.pipeline_page`)."""
