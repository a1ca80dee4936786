"""sarcasmd's soak tests as a package: the plain and full-outputs soak (`sarcasmd-soak`,
scripts/soak/run) and the fault soak (`sarcasmd-soak-faults`, scripts/soak/run-faults).
See cli.py and faults_cli.py for what each measures and judges."""

__version__ = "1.0.0"
