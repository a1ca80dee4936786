"""Shared code of the text studies in models/studies/ (MiniLM in JAX, the exploratory
protocols, the text-candidate protocols): imported by several studies, so it lives here
rather than in one study's folder (a study never imports another study). Not the recipe:
nothing here ships.
"""
