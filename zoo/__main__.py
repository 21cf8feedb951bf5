"""python -m zoo: the entry points."""

print("""the zoo — commands:
  python -m zoo.train recipe=NAME [key=value ...]     train (--list: recipes, --help: usage)
  python -m zoo.evaluate TARGET [--json]             test metrics of a checkpoint / pretrained name
  python -m zoo.predict TARGET [inputs] [key=value]  inference
  python -m zoo.pretrained                           released weights and their metrics
  python -m zoo.estimators compare                   gradient estimators side by side
installed with pip, each is also a command: zoo-train, zoo-evaluate, zoo-predict, zoo-pretrained, zoo-estimators
from Python: model = zoo.load("vae-digits"); model.sample(16) (every model's methods: docs/api.md)""")
