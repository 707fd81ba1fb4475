"""Brain as an MCP server: ``brain mcp`` (spec/06-operations.md §12).

An agent that speaks the Model Context Protocol reaches Brain through tools
(remember, recall, state_fact, supersede, forget, history, review_list,
review_decide), each a call of the :class:`brain.Brain` facade over the wire to a
running server. The modules, each named for what it holds:

- :mod:`brain.mcp.connection`: the facade, connected on first use, again after a loss;
- :mod:`brain.mcp.arguments`: tool arguments turned into facade arguments;
- :mod:`brain.mcp.refusals`: Brain errors turned into tool errors;
- :mod:`brain.mcp.answers`: what each tool answers, as text and as structured content;
- :mod:`brain.mcp.descriptions`: the texts a language model reads to choose a tool;
- :mod:`brain.mcp.tools`: the tools and the server that lists them;
- :mod:`brain.mcp.serve`: running that server over stdio or streamable HTTP.
"""
