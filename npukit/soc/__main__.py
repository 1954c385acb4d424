from .schema import reference_markdown

print(reference_markdown())
