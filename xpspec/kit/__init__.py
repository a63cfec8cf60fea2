"""The adapter kit: what framework adapters share, so that each adapter keeps only the glue
to its framework. It depends on the protocol core (:mod:`xpspec.protocol`), the standard
library, numpy and torch, never on the reference implementation or the conformance suite.

- :mod:`~xpspec.kit.items` — ``(env, episode, t)`` decoded from toy observations through the
  identity encoding (clause ``timestep.identity``), and item columns;
- :mod:`~xpspec.kit.steps` — time steps as an adapter reads them from a framework's batches
  (step type, reward, discount, policy state, action, annotation), including the transition
  rows of frameworks that reset in the step that ends an episode and of those that reset in
  the next one;
- :mod:`~xpspec.kit.events` — those time steps as trace events (``EnvStep``, ``Store``,
  ``Exclude``, ``Hold``, ``RunEnd``);
- :mod:`~xpspec.kit.exclusion` — which rows an exclusion preprocessor selects (the
  framework's own mechanism still drops them);
- :mod:`~xpspec.kit.episode_hold` — each env's rows held until its episode ends, then
  released with their outcome (the framework's own buffer still writes them);
- :mod:`~xpspec.kit.goals` — the toy env's goal reward over a batch;
- :mod:`~xpspec.kit.value` — the toy value function of the learner scenarios;
- :mod:`~xpspec.kit.episodes` — counts and groupings of the toy env's episodes that learner
  operations need;
- :mod:`~xpspec.kit.transition_rings` — how many transition rows stand for a relabel
  scenario's ring of time steps;
- :mod:`~xpspec.kit.quiet` — the seeded, quiet context an operation runs in;
- :mod:`~xpspec.kit.arrays` — framework columns (numpy, torch, JAX) as plain values;
- :mod:`~xpspec.kit.release` — the smoke check that the framework is the release the adapter
  was written for (which a version sweep lifts).
"""

__all__: list[str] = []
