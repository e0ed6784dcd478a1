"""The texts of `jaxbridge.playground`'s errors (pinned by tests/playground/test_brax_check.py)."""

NOT_BRAX = (
    "jaxbridge.playground.train(trainer, ...) takes brax's `ppo.train` or `sac.train` "
    "(from brax.training.agents.ppo.train / brax.training.agents.sac.train); got {got}. Call "
    "any other trainer directly."
)

BAD_ARGUMENT = (
    "jaxbridge.playground.train: the arguments do not fit {trainer}'s signature: "
    "{error}. Pass the trainer's own keyword arguments."
)

DEVICES = (
    "brax's {trainer}.train spreads num_envs = {num_envs} environments over {devices} "
    "devices, so num_envs must be a multiple of {devices}: choose num_envs accordingly, or "
    "limit the devices with max_devices_per_host."
)

PPO_BATCH = (
    "brax's ppo.train collects batch_size * num_minibatches = {batch_size} * "
    "{num_minibatches} = {batch} trajectories a training step from num_envs = {num_envs} "
    "environments, so {batch} must be a multiple of num_envs (brax asserts it with no "
    "message). Choose num_envs among {divisors}, or batch_size and num_minibatches whose "
    "product is a multiple of {num_envs}."
)

SAC_PREFILL = (
    "brax's sac.train first fills its replay buffer with min_replay_size = "
    "{min_replay_size} transitions, in whole steps of num_envs = {num_envs} environments "
    "times action_repeat = {action_repeat}: {prefill} environment steps, more than "
    "num_timesteps = {num_timesteps} (brax asserts it with no message). Raise num_timesteps "
    "to at least {prefill} or lower min_replay_size."
)

SAC_REPLAY = (
    "brax's sac.train needs max_replay_size >= min_replay_size; got max_replay_size = "
    "{max_replay_size} < min_replay_size = {min_replay_size} (brax asserts it after the "
    "prefill, with no message). Raise max_replay_size or lower min_replay_size."
)
