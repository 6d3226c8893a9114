"""Trial records, where they were measured (provenance), and the histories that hold them (:mod:`.storage`)."""
