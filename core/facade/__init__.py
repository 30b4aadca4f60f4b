"""The Broker facade's calls, one module per role (produce, consume, admin, transactions).

Each module's docstring says what a front-end calls that role for and what it must never
do. `core.broker.Broker` composes the role classes into the one facade object and owns their
state; front-ends import `Broker` from there, never a role class.
"""
