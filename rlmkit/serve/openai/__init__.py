"""The OpenAI-compatible routes: chat completions (``chat.py``, ``chat_chunks.py``) and the
Responses API (``responses_request.py``, ``responses.py``, ``stored.py``), mapped onto the
program's inputs by ``mapping.py``, served by the module-level handlers in ``routes.py`` and
``responses_routes.py``."""
