"""Chat messages as every stage reads them, below every stage.

``rows``: input rows (OpenAI ``messages``, ShareGPT ``conversations``, ``prompt``) to messages, or a
reason; stored and sent forms of a history. ``parse``: a chat completion body to its texts and ids,
whatever the server's layout. ``render``: a stored history as the server renders it. Generate writes
with them, reconstruct and the pre-flight rebuild with them, evaluate reads its prompts with them.
"""
