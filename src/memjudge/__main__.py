from memjudge.cli import run

run()
