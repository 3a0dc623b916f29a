-- CONTRACT §13 (attachNotes): the notes a delivery may carry as context, for the
-- dispatcher, which reads them when it sends an attempt. The importer owns the note store;
-- this view in the `shared` schema is the one shape it promises to other services (path,
-- content, content_hash of the visible notes), so its tables can change behind it. A view,
-- not a copy kept in step: it is exactly the store as of the reader's snapshot, costs the
-- note writes nothing, and cannot drift. (A later migration that changes
-- these columns of importer.notes recreates the view with the same three columns.)
create view shared.context_notes as
    select path, content, content_hash
    from importer.notes
    where not removed;
